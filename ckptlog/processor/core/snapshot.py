"""Snapshot codec (contract §6): every run's state of one input partition plus its next offset,
as versioned canonical JSON with a SHA-256 checksum. Pure: bytes in, bytes out.

Canonical = keys in the order they are written, no whitespace, UTF-8, shortest round-trip floats
(NaN/Infinity literals kept, since metrics may hold them), encoded by pydantic-core (3x faster than
`json.dumps`, which a snapshot of a long deletion backlog made a tenth of the processor's time).
The checksum covers the bytes of `snapshot` as written, so any flipped byte or truncation is caught
before a state is trusted; a snapshot written before the encoder changed (floats spelled as
Python's repr, `1.5e-07`) or reformatted by hand is checked against its body encoded again.
Key order is data (contract §3): a metric's flattened lookup depends on the order its keys arrived
in (`{"a/b": 1, "a": {"b": 2}}`), so a restored fold must see the very order a clean one does;
schema version 1 sorted every object's keys and lost it.

Schema version 3 added what a fold needs beyond its runs: the runs refused for their root
(`refused`, contract §3) and the decode limits among the settings (contract §6); it came with new
fold rules (every run a root of its own, refused runs). A version 1 or 2 snapshot holds a state
folded under the old rules, which a clean replay under the new ones may not build (a run refused
before it left no trace; runs without run_started shared --storage-root), so it is refused with
the command that rebuilds it (`SnapshotVersionError`).

Schema version 4 added finished runs (contract §3 "Finished runs"): each run's `finished` (the
keep mode of its run_finished, or null) and `finished` beside `runs` (run id -> root of each
finished run that left the hot state). A version 3 snapshot is restored as is: its log held no
run_finished (a build writing 3 did not know the type; it refused it as `unknown_type`), so it
has no finished run, and every rule for the runs it holds is unchanged.

Schema version 5 bounded the finished records (contract §3 "Finished runs", *Expiry*): the
settings gained `finished_runs_kept`, and the order of `finished` is data (retirement order, the
oldest first: the next to expire). A version 3 or 4 snapshot is restored with that setting at its
default (`_ADDED_IN`); a 4 whose table holds more records than the bound loses its oldest at once
(`Fold`), as a fold under the bound would have held only the newest.

Schema version 6 stores each run's deduplication state (contract §3 "Deduplication") as `dedup`
(`Seen.data`: the count of applications, each producer's mark, the foreign ids) instead of
`seen`, the list of the last `dedup_window` ids. A version 3–5 snapshot's list is read into the
new state as if each of its ids, oldest first, were applied again (`Seen.of_ids`): every id it
held stays known (a deletion completion's id too, which a fold under schema 6 would not
remember; it ages out with the foreign ids).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import pydantic_core

from ckptlog import __version__
from ckptlog.errors import SnapshotCorrupt, SnapshotVersionError
from ckptlog.events.decoded import CheckpointConfig, RunStartedData, ValidationSpec
from ckptlog.events.retention_rules import RULE_STATES as _RULE_STATES
from ckptlog.processor.core.dedup import Seen
from ckptlog.processor.core.scoring import score
from ckptlog.processor.core.state import (
    CheckpointRecord,
    Evicted,
    FoldSettings,
    RunState,
    new_checkpoint_list,
    root_prefix,
)

if TYPE_CHECKING:
    from ckptlog.processor.core.fold import Fold

FORMAT = "ckptlog.snapshot"
SCHEMA_VERSION = 6
RESTORABLE = (3, 4, 5, 6)  # the versions decode reads: 3 is 4 without finished runs, 4 is 5 without their bound,
# 5 is 6 with the dedup window as a list of ids
_S = TypeVar("_S", bound=msgspec.Struct)


@dataclass(slots=True)
class Snapshot:
    topic: str
    partition: int
    next_offset: int
    settings: FoldSettings
    runs: dict[str, RunState] = field(default_factory=dict)
    processor_version: str = __version__
    refused: dict[str, str] = field(default_factory=dict)  # run id -> why its run_started was refused
    finished: dict[str, str] = field(default_factory=dict)  # finished runs out of the hot state -> root


def of_fold(fold: Fold, topic: str, partition: int, next_offset: int) -> Snapshot:
    """The snapshot of everything `fold` holds, to resume at `next_offset`."""
    return Snapshot(
        topic, partition, next_offset, fold.settings, fold.runs, refused=fold.refused, finished=fold.finished
    )


def canonical(value: Any, *, sort_keys: bool = False) -> bytes:
    """The canonical bytes of `value` (`sort_keys`: for comparing documents, never for a snapshot)."""
    if sort_keys:
        return _dumps(value, sort_keys=True)
    return pydantic_core.to_json(value, inf_nan_mode="constants")


def _dumps(value: Any, *, sort_keys: bool = False) -> bytes:
    """`json.dumps`'s compact UTF-8 bytes: the canonical encoding of the snapshots ckptlog 0.2 and earlier wrote."""
    return json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode()


_BODY_AT = b',"snapshot":'


def _checksum_ok(data: bytes, checksum: object, body: dict[str, Any]) -> bool:
    """Whether `checksum` is the digest of the body as written (the encoder's layout: the body
    last, after `_BODY_AT`), else of the body encoded again: canonically (a snapshot reformatted by
    hand) or by `json.dumps` (ckptlog 0.2 and earlier, whose float spelling differs: `1.5e-07`)."""
    at = data.find(_BODY_AT)
    if at >= 0 and data.endswith(b"}") and checksum == _sha256(data[at + len(_BODY_AT) : -1]):
        return True
    return checksum in (_sha256(canonical(body)), _sha256(_dumps(body)))


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def encode(snapshot: Snapshot) -> bytes:
    body = {
        "processor_version": snapshot.processor_version,
        "topic": snapshot.topic,
        "partition": snapshot.partition,
        "next_offset": snapshot.next_offset,
        "settings": _settings_out(snapshot.settings),
        "runs": {run_id: run_out(run) for run_id, run in snapshot.runs.items()},
        "refused": snapshot.refused,
        "finished": snapshot.finished,
    }
    encoded = canonical(body)
    # canonical() of the envelope, without encoding the body a second time: its keys come in
    # the order checksum, format, schema_version, snapshot (tests check the bytes are the same).
    head = canonical({"checksum": _sha256(encoded), "format": FORMAT, "schema_version": SCHEMA_VERSION})
    return head[:-1] + b',"snapshot":' + encoded + b"}"


def decode(data: bytes, *, name: str = "snapshot") -> Snapshot:
    """Verify and rebuild; SnapshotCorrupt to skip this one, SnapshotVersionError to stop."""
    try:
        outer = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SnapshotCorrupt(f"{name}: not valid JSON ({exc}); it was truncated or damaged — skipping it") from None
    if not isinstance(outer, dict) or outer.get("format") != FORMAT:
        raise SnapshotCorrupt(f"{name}: not a ckptlog snapshot (format field missing); skipping it")
    version = outer.get("schema_version")
    if not isinstance(version, int):
        raise SnapshotCorrupt(f"{name}: schema_version {version!r} is not an integer; skipping it")
    if version > SCHEMA_VERSION:
        raise SnapshotVersionError(
            f"{name}: snapshot schema version {version!r} is newer than this build reads "
            f"({SCHEMA_VERSION}); upgrade ckptlog, or run `ckptlog replay` to rebuild"
        )
    if version not in RESTORABLE:
        raise SnapshotVersionError(
            f"{name}: snapshot schema version {version!r} was folded under older rules (runs without "
            "run_started shared --storage-root, refused runs were not recorded), which a clean replay under "
            "this build's may not give; rebuild the snapshots with `ckptlog replay --snapshots NEW_URL` and "
            "restart with --snapshots NEW_URL (docs/runbook.md, Upgrading)"
        )
    body = outer.get("snapshot")
    if not isinstance(body, dict):
        raise SnapshotCorrupt(f"{name}: no snapshot body; skipping it")
    if not _checksum_ok(data, outer.get("checksum"), body):
        raise SnapshotCorrupt(f"{name}: checksum mismatch; the object is damaged — skipping it")
    try:
        return _snapshot_in(body, version)
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotCorrupt(f"{name}: checksum ok but content invalid ({exc!r}); skipping it") from None


class _SettingsBody(msgspec.Struct):
    settings: dict[str, Any]


class _SettingsOnly(msgspec.Struct):
    format: str
    schema_version: int
    snapshot: _SettingsBody


def decode_settings(data: bytes, *, name: str = "snapshot") -> FoldSettings:
    """Only the fold settings of a snapshot (the store has checked the object's digest): what a
    replay of the log from its start folds with, without rebuilding ~1 MB of state per run."""
    try:
        outer = msgspec.json.decode(data, type=_SettingsOnly)
        if outer.format != FORMAT or outer.schema_version not in RESTORABLE:
            raise ValueError(f"format {outer.format!r}, schema version {outer.schema_version}")
        return _settings_in(outer.snapshot.settings, outer.schema_version)
    except (msgspec.DecodeError, msgspec.ValidationError, KeyError, TypeError, ValueError) as exc:
        raise SnapshotCorrupt(f"{name}: its settings cannot be read ({exc}); skipping it") from None


_ADDED_IN: dict[str, int] = {"finished_runs_kept": 5}
"""FoldSettings fields a snapshot of an older schema lacks (their default then), with the version adding them."""

_STRUCTS: dict[str, type[msgspec.Struct]] = {"default_config": CheckpointConfig, "default_validation": ValidationSpec}
"""The FoldSettings fields that are Structs; every other field is a JSON scalar."""


def _settings_out(s: FoldSettings) -> dict[str, Any]:
    """Every field of the settings, in declaration order (a new fold setting needs nothing here)."""
    out: dict[str, Any] = {}
    for f in fields(s):
        value = getattr(s, f.name)
        out[f.name] = _out(value) if f.name in _STRUCTS else value
    return out


def _settings_in(d: dict[str, Any], version: int = SCHEMA_VERSION) -> FoldSettings:
    values: dict[str, Any] = {}
    for f in fields(FoldSettings):
        if version < _ADDED_IN.get(f.name, 0):
            continue  # an older schema's snapshot lacks it: the field's default
        value = d[f.name]
        if f.name in _STRUCTS:
            value = _in(value, _STRUCTS[f.name])
        elif isinstance(value, bool) or not isinstance(value, int | str | None):
            raise ValueError(f"setting {f.name} is {value!r}")
        elif f.name in _ADDED_IN and (not isinstance(value, int) or value < 0):
            raise ValueError(f"setting {f.name} is {value!r}, not an int >= 0")
        values[f.name] = value
    return FoldSettings(**values)


def run_out(run: RunState) -> dict[str, Any]:
    """One run's state as JSON-ready data (also what `fold --state` dumps)."""
    return {
        "config": _out(run.config),
        "storage_root": run.storage_root,
        "default_validation": _out(run.default_validation),
        "started": _out(run.started) if run.started is not None else None,
        "checkpoints": [
            {
                "path": r.path,
                "key": r.key,
                "metrics": r.metrics,
                "report_index": r.report_index,
                "status": r.status,
                "validation": _out(r.validation) if r.validation is not None else None,
                "preserved": r.preserved,
            }
            for r in run.checkpoints
        ],
        "latest": run.latest.key if run.latest is not None else None,
        "pending": list(run.pending),
        "report_count": run.report_count,
        "generation": run.generation,
        "index_in_generation": run.index_in_generation,
        "dedup": run.seen.data(),
        "outstanding": [[key, path, eviction] for key, (path, eviction) in run.outstanding.items()],
        "evictions": run.evictions,
        **{name: run.rule_state.get(name) for name in _RULE_STATES},
        "finished": run.finished,
    }


def _run_in(run_id: str, d: dict[str, Any], version: int, window: int) -> RunState:
    config = _in(d["config"], CheckpointConfig)
    root = d["storage_root"]
    started = _in(d["started"], RunStartedData) if d["started"] is not None else None
    run = RunState(
        run_id, config, root, root_prefix(root), _in(d["default_validation"], ValidationSpec), started=started
    )
    run.checkpoints = new_checkpoint_list()
    for c in d["checkpoints"]:
        has, value, _ = score(c["metrics"], config.checkpoint_score_attribute, config.checkpoint_score_order)
        spec = _in(c["validation"], ValidationSpec) if c["validation"] is not None else None
        record = CheckpointRecord(
            c["path"],
            c["key"],
            c["metrics"],
            c["report_index"],
            c["status"],
            spec,
            (has, value, c["report_index"]),
            c.get("preserved"),
        )
        run.checkpoints.add(record)
        run.by_key[record.key] = record
    run.latest = run.by_key[d["latest"]] if d["latest"] is not None else None
    run.pending = {key: run.by_key[key] for key in d["pending"]}
    run.report_count, run.generation = d["report_count"], d["generation"]
    run.index_in_generation = d["index_in_generation"]
    run.seen = Seen.of_data(d["dedup"], run_id) if version >= 6 else Seen.of_ids(d["seen"], run_id, window)
    run.outstanding = {key: Evicted(path, eviction) for key, path, eviction in d["outstanding"]}
    run.evictions = int(d["evictions"])
    run.rule_state = {name: d[name] for name in _RULE_STATES if d.get(name) is not None}
    finished = d.get("finished")  # absent in schema 3
    if finished not in (None, "kept", "best"):
        raise ValueError(f"run {run_id!r}: finished is {finished!r}")
    run.finished = finished
    run.preserved_count = sum(1 for record in run.by_key.values() if record.preserved is not None)
    run.rebuild_nesting()
    return run


def _out(struct: msgspec.Struct) -> Any:
    """A Struct as JSON-ready data: every field, as `model_dump()` wrote it before (same bytes)."""
    return msgspec.to_builtins(struct)


def _in(data: Any, kind: type[_S]) -> _S:
    """A Struct from snapshot data; its constraints are checked (ValueError: a corrupt snapshot)."""
    return msgspec.convert(data, kind)


def _snapshot_in(body: dict[str, Any], version: int) -> Snapshot:
    settings = _settings_in(body["settings"], version)
    runs = {run_id: _run_in(run_id, d, version, settings.dedup_window) for run_id, d in body["runs"].items()}
    refused = body["refused"]
    if not isinstance(refused, dict) or not all(isinstance(v, str) for v in refused.values()):
        raise ValueError("refused must map run ids to reasons")
    finished = body.get("finished", {})  # absent in schema 3
    if not isinstance(finished, dict) or not all(isinstance(v, str) for v in finished.values()):
        raise ValueError("finished must map run ids to roots")
    return Snapshot(
        body["topic"],
        int(body["partition"]),
        int(body["next_offset"]),
        settings,
        runs,
        body["processor_version"],
        dict(refused),
        dict(finished),
    )
