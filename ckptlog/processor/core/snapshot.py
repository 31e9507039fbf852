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
default (core/settings_codec.py `ADDED_IN`); a 4 whose table holds more records than the bound loses its oldest at once
(`Fold`), as a fold under the bound would have held only the newest.

Schema version 6 added two tables beside `runs`, `refused` and `finished`:
- the runs refused because their root is reached through a symlink below `--storage-root` (contract
  §9 *Roots behind a symlink*): `symlinked`, run id -> canonical root. A version 3 to 5 snapshot has
  none: its build did not know the `root_refused` fact (it refused it as `unknown_type`), so its log
  refused no run for a link;
- reopened runs (contract §3 "Reopened runs"): each run's `reopened` (its reopen count) and `retired`
  (run id -> the state of a retired run whose record is kept, with an empty `seen`; a subset of
  `finished`, in its order). The fold holds those states as their encoding here (`retired_state`: a
  fraction of a `RunState`'s memory, and a snapshot writes them without encoding them again) and
  decodes one only as its run is reopened (`reopened_state`). A version 3 to 5 snapshot is restored
  as is: its retired runs kept no state, so a reopen of one is refused (`not_reopenable`), and its
  runs have never been reopened (the type was `unknown_type` to the builds writing them).

Schema version 7 stores each run's deduplication state (contract §3 "Deduplication") as `dedup`
(`Seen.data`: the count of applications, each producer's mark, the foreign ids) instead of `seen`,
the list of the last `dedup_window` ids. A version 3 to 6 snapshot's list is read into the new
state as if each of its ids, oldest first, were applied again (`Seen.of_ids`): every id it held
stays known (a deletion completion's id too, which a fold under schema 7 would not remember; it
ages out with the foreign ids). A retired run's kept state (`retired_state`) holds its structured
ranges and no foreign ids; a version 6 snapshot's retired states, written with `"seen": []`, are
read as such a state with nothing remembered (`_retired_in`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
import pydantic_core

from ckptlog import __version__
from ckptlog.errors import SnapshotCorrupt, SnapshotVersionError
from ckptlog.processor.core.chain import Chain
from ckptlog.processor.core.dedup import Seen
from ckptlog.processor.core.run_codec import (
    ENTRIES,
    checked_prefix,
    decoded_entry,
    entry_of,
    restored_run,
    run_in,
)
from ckptlog.processor.core.run_codec import run_out as run_out
from ckptlog.processor.core.settings_codec import settings_in, settings_out
from ckptlog.processor.core.state import FoldSettings, RunState

if TYPE_CHECKING:
    from ckptlog.processor.core.fold import Fold

FORMAT = "ckptlog.snapshot"
DELTA_FORMAT = "ckptlog.snapshot.delta"  # what changed since the previous object of a chain (core/delta.py)
SCHEMA_VERSION = 7
# the versions decode reads: 3 is 4 without finished runs, 4 is 5 without their bound, 5 is 6 without symlinked
# runs and the retired runs' state, 6 is 7 with the dedup window as a list of ids
RESTORABLE = (3, 4, 5, 6, 7)


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
    symlinked: dict[str, str] = field(default_factory=dict)  # runs refused for a link to their root -> root
    retired: dict[str, bytes] = field(default_factory=dict)  # of those, the reopenable ones -> `retired_state`
    chain: Chain | None = None  # the objects it was restored from (core/delta.py `decode_chain`)


def of_fold(fold: Fold, topic: str, partition: int, next_offset: int) -> Snapshot:
    """The snapshot of everything `fold` holds, to resume at `next_offset`."""
    return Snapshot(
        topic,
        partition,
        next_offset,
        fold.settings,
        fold.runs,
        refused=fold.refused,
        finished=fold.finished,
        symlinked=fold.symlinked,
        retired=fold.retired,
    )


def canonical(value: Any, *, sort_keys: bool = False) -> bytes:
    """The canonical bytes of `value` (`sort_keys`: for comparing documents, never for a snapshot)."""
    if sort_keys:
        return _dumps(value, sort_keys=True)
    return pydantic_core.to_json(value, inf_nan_mode="constants")


def _dumps(value: Any, *, sort_keys: bool = False) -> bytes:
    """`json.dumps`'s compact UTF-8 bytes: the canonical encoding of the snapshots ckptlog 0.2 and earlier wrote."""
    return json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode()


def _checksum_ok(data: bytes, checksum: object, body: dict[str, Any], key: str) -> bool:
    """Whether `checksum` is the digest of the body as written (`_as_written`), else of the body
    encoded again: canonically (a snapshot reformatted by hand) or by `json.dumps` (ckptlog 0.2 and
    earlier, whose float spelling differs: `1.5e-07`)."""
    return _as_written(data, checksum, key) or checksum in (_sha256(canonical(body)), _sha256(_dumps(body)))


def _as_written(data: bytes, checksum: object, key: str) -> bool:
    """Whether `checksum` is the digest of the body in the encoder's layout: last, after `,"{key}":`."""
    body_at = b',"' + key.encode() + b'":'
    at = data.find(body_at)
    return at >= 0 and data.endswith(b"}") and checksum == _sha256(memoryview(data)[at + len(body_at) : -1])


def _sha256(data: bytes | memoryview) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Raw(NamedTuple):
    """Canonical JSON already encoded, in pieces: `compose` writes them as they are."""

    chunks: list[bytes]


def compose(fields: Iterable[tuple[str, Any]]) -> Raw:
    """canonical() of the object of `fields`, whose values may be encoded already (`Raw`), in pieces:
    joined, the very bytes canonical() gives the object with those values decoded (compact, keys
    in this order). Pieces, so that a snapshot of 100 MB is copied once, when it is sealed."""
    out, separator = [b"{"], b""
    for key, value in fields:
        out.append(separator + canonical(key) + b":")
        if isinstance(value, Raw):
            out.extend(value.chunks)
        else:
            out.append(canonical(value))
        separator = b","
    out.append(b"}")
    return Raw(out)


def run_entry(run_id: str, run: RunState) -> bytes:
    """One run as an entry of a snapshot's `runs` object, `"id":{record}`: the unit a base and a
    delta (ckptlog/processor/core/delta.py) both write, whatever the record holds."""
    return canonical(run_id) + b":" + canonical(run_out(run))


def entries(items: Iterable[bytes]) -> Raw:
    """The object of encoded entries (`run_entry`)."""
    out = [b"{"]
    for item in items:
        out += (item, b",")
    if len(out) > 1:
        out[-1] = b"}"  # the last comma
    else:
        out.append(b"}")
    return Raw(out)


def body_fields(snapshot: Snapshot, runs: Raw) -> list[tuple[str, Any]]:
    """A snapshot's body, in the order written, with its runs encoded already (one run at a time,
    so that a snapshot can be encoded in slices while the fold goes on: service/snapshotting.py)."""
    return [
        ("processor_version", snapshot.processor_version),
        ("topic", snapshot.topic),
        ("partition", snapshot.partition),
        ("next_offset", snapshot.next_offset),
        ("settings", settings_out(snapshot.settings)),
        ("runs", runs),
        ("refused", snapshot.refused),
        ("finished", snapshot.finished),
        ("symlinked", snapshot.symlinked),
        ("retired", retired_entries(snapshot.retired)),  # last, its states spliced in as they are held
    ]


def retired_entries(retired: dict[str, bytes]) -> Raw:
    """The `retired` table as written: each state as the fold holds it (`retired_state`: the bytes
    canonical() would write for it), not encoded again."""
    return entries(canonical(run_id) + b":" + state for run_id, state in retired.items())


def seal(body: Raw, *, form: str = FORMAT, key: str = "snapshot") -> bytes:
    """The envelope around an encoded body: canonical() of `{"checksum", "format", "schema_version",
    key: body}` without encoding the body a second time (tests check the bytes are the same)."""
    digest = hashlib.sha256()
    for chunk in body.chunks:
        digest.update(chunk)
    head = canonical({"checksum": "sha256:" + digest.hexdigest(), "format": form, "schema_version": SCHEMA_VERSION})
    return b"".join([head[:-1], b',"', key.encode(), b'":', *body.chunks, b"}"])


def encode(snapshot: Snapshot) -> bytes:
    runs = entries(run_entry(run_id, run) for run_id, run in snapshot.runs.items())
    return seal(compose(body_fields(snapshot, runs)))


def decode(data: bytes, *, name: str = "snapshot") -> Snapshot:
    """Verify and rebuild; SnapshotCorrupt to skip this one, SnapshotVersionError to stop."""
    version, body = opened(data, name=name)
    return snapshot_in(body, version, name=name)


def parsed(data: bytes) -> Any:
    """JSON `data` as Python values, as `json.loads` gives them: by msgspec (a restore of 100,000 runs
    spends a third of its time parsing; msgspec takes a quarter of json.loads' time), and by json.loads
    where msgspec refuses what json.loads reads: the NaN/Infinity literals a metric may hold, lone
    surrogates in strings, numbers beyond a double's range."""
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError:
        return json.loads(data)


def typed_envelope(key: str, fields: Iterable[str], runs: Any) -> type[msgspec.Struct]:
    """An envelope as `opened` decodes it in one pass: its body's `fields` (the ones its reader reads),
    `runs` (run id -> a run's entry, typed: core/run_codec.py) of type `runs` and every other as the JSON
    value it holds. Every field is optional, so a body lacking one decodes to a dict lacking it."""
    body = [(name, runs if name == "runs" else Any, msgspec.UNSET) for name in fields]
    outer = [(name, Any, msgspec.UNSET) for name in ("checksum", "format", "schema_version")]
    kinds = msgspec.defstruct(f"{key}_body", body, kw_only=True)
    return msgspec.defstruct(f"{key}_envelope", [*outer, (key, kinds, msgspec.UNSET)], kw_only=True)


BASE_ENVELOPE = typed_envelope(
    "snapshot", (name for name, _ in body_fields(Snapshot("", 0, 0, FoldSettings()), Raw([]))), ENTRIES
)


def opened(
    data: bytes, *, name: str, form: str = FORMAT, key: str = "snapshot", typed: type[msgspec.Struct] = BASE_ENVELOPE
) -> tuple[int, dict[str, Any]]:
    """The schema version and body of an envelope, verified: SnapshotCorrupt for a damaged one,
    SnapshotVersionError for one this build cannot restore. Decoded as `typed` (its runs typed) when
    it decodes so and its checksum is of the body as written; else as plain JSON data (`parsed`), its
    damage named, its checksum checked against the body encoded again too (`_checksum_ok`)."""
    outer = _typed(data, typed, key)
    written = outer is not None
    if outer is None:
        try:
            outer = parsed(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise SnapshotCorrupt(
                f"{name}: not valid JSON ({exc}); it was truncated or damaged — skipping it"
            ) from None
    if not isinstance(outer, dict) or outer.get("format") != form:
        raise SnapshotCorrupt(f"{name}: not a ckptlog snapshot ({form!r} expected in its format field); skipping it")
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
    body = outer.get(key)
    if not isinstance(body, dict):
        raise SnapshotCorrupt(f"{name}: no {key} body; skipping it")
    if not (written or _checksum_ok(data, outer.get("checksum"), body, key)):
        raise SnapshotCorrupt(f"{name}: checksum mismatch; the object is damaged — skipping it")
    return version, body


def _typed(data: bytes, typed: type[msgspec.Struct], key: str) -> dict[str, Any] | None:
    """The envelope decoded as `typed`, as dicts, if it decodes so, has a body and its checksum is of
    that body as written; else None (the slow path decides what is wrong, or reads it otherwise)."""
    try:
        outer = msgspec.json.decode(data, type=typed)
    except msgspec.DecodeError:  # malformed, NaN literals, lone surrogates, a field of another type
        return None
    envelope = _fields(outer)
    body = envelope.get(key)  # none in an envelope typed for another key
    if not isinstance(body, msgspec.Struct) or not _as_written(data, envelope.get("checksum"), key):
        return None
    return {**envelope, key: _fields(body)}


def _fields(struct: msgspec.Struct) -> dict[str, Any]:
    """A Struct's fields as a dict: those its JSON object had."""
    return {f: v for f in struct.__struct_fields__ if (v := getattr(struct, f)) is not msgspec.UNSET}


def snapshot_in(body: dict[str, Any], version: int, *, name: str = "snapshot") -> Snapshot:
    """The snapshot a verified body holds (SnapshotCorrupt if its content is not one)."""
    try:
        return _snapshot_in(body, version)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SnapshotCorrupt(f"{name}: checksum ok but content invalid ({exc!r}); skipping it") from None


class _SettingsBody(msgspec.Struct):
    settings: dict[str, Any]


class _SettingsOnly(msgspec.Struct):
    format: str
    schema_version: int
    snapshot: _SettingsBody | None = None
    delta: _SettingsBody | None = None  # a delta's body (DELTA_FORMAT): it holds the chain's settings too


def decode_settings(data: bytes, *, name: str = "snapshot") -> FoldSettings:
    """Only the fold settings of a snapshot or delta (the store has checked the object's digest):
    what a replay of the log from its start folds with, without rebuilding ~1 MB of state per run."""
    try:
        outer = msgspec.json.decode(data, type=_SettingsOnly)
        body = {FORMAT: outer.snapshot, DELTA_FORMAT: outer.delta}.get(outer.format)
        if body is None or outer.schema_version not in RESTORABLE:
            raise ValueError(f"format {outer.format!r}, schema version {outer.schema_version}")
        return settings_in(body.settings, outer.schema_version)
    except (msgspec.DecodeError, msgspec.ValidationError, KeyError, TypeError, ValueError) as exc:
        raise SnapshotCorrupt(f"{name}: its settings cannot be read ({exc}); skipping it") from None


def retired_state(run: RunState) -> bytes:
    """A retired run's state as the fold keeps it for a reopen: its snapshot entry with the structured
    part of its dedup state and no foreign ids (contract §3 "Reopened runs"), encoded (canonical, so
    a snapshot can write it as it is)."""
    return canonical({**run_out(run), "dedup": run.seen.data(foreign=False)})


def reopened_state(run_id: str, state: bytes) -> RunState:
    """The run `retired_state` encoded, back (its nesting index and sort keys rebuilt), its keys checked
    as a restore checks a run's (`checked_prefix`: a ValueError, which refuses the reopen)."""
    entry = decoded_entry(state)
    checked_prefix(run_id, entry)
    return run_in(run_id, entry, SCHEMA_VERSION)


def _retired_in(table: Any, finished: dict[str, str], version: int) -> dict[str, bytes]:
    """The retired states, encoded again as the fold holds them (decoded only as one is reopened); a
    version 6 state's `seen` (written empty) becomes `dedup` in its place, as `retired_state` writes it."""
    if not isinstance(table, dict):
        raise ValueError("retired must map run ids to states")
    out = {}
    for run_id, state in table.items():
        if run_id not in finished or not isinstance(state, dict) or state.get("finished") not in ("kept", "best"):
            raise ValueError(f"retired holds run {run_id!r} with no finished record, or not finished")
        if version < 7:
            state = _dedup_in_place(run_id, state)
        out[run_id] = canonical(state)
    return out


def _dedup_in_place(run_id: str, state: dict[str, Any]) -> dict[str, Any]:
    """A version 6 retired state with `dedup` (its `seen` ids read, foreign ones dropped) where `seen` was."""
    ids = state["seen"]
    if not isinstance(ids, list):
        raise ValueError(f"retired run {run_id!r}: seen is {ids!r}, not a list of ids")
    kept = Seen.of_ids(ids, run_id, len(ids)).data(foreign=False)
    return {("dedup" if key == "seen" else key): (kept if key == "seen" else value) for key, value in state.items()}


def _snapshot_in(body: dict[str, Any], version: int) -> Snapshot:
    settings = settings_in(body["settings"], version)
    window = settings.dedup_window
    runs = {run_id: restored_run(run_id, entry_of(entry), version, window) for run_id, entry in body["runs"].items()}
    refused = body["refused"]
    if not isinstance(refused, dict) or not all(isinstance(v, str) for v in refused.values()):
        raise ValueError("refused must map run ids to reasons")
    finished = body.get("finished", {})  # absent in schema 3
    if not isinstance(finished, dict) or not all(isinstance(v, str) for v in finished.values()):
        raise ValueError("finished must map run ids to roots")
    symlinked = body.get("symlinked", {})  # absent before schema 6
    if not isinstance(symlinked, dict) or not all(isinstance(v, str) and v for v in symlinked.values()):
        raise ValueError("symlinked must map run ids to roots")
    retired = _retired_in(body["retired"], finished, version) if version >= 6 else {}
    return Snapshot(
        body["topic"],
        int(body["partition"]),
        int(body["next_offset"]),
        settings,
        runs,
        body["processor_version"],
        dict(refused),
        dict(finished),
        dict(symlinked),
        retired,
    )
