"""One run's snapshot entry, both ways (contract §6): `run_out` writes a RunState as JSON-ready data,
`run_in` builds it back from a `RunEntry`. Pure.

A `RunEntry` is the entry as msgspec decodes it, typed: its config, validation specs and run_started
data straight into their Structs (checked as an event's are: an invalid one is a corrupt snapshot),
every other field as the JSON value it holds, checked where the state is built. A snapshot's body is
decoded with its runs typed so in one pass over the bytes (core/snapshot.py `opened`), which a restore
of 100,000 runs needs: decoding them as dicts, then converting each Struct and looking each field up,
took twice as long (bench/incremental.py `--only restore`). A body read the slow way (NaN literals,
lone surrogates: json.loads) holds dicts, turned into entries by `entry_of`, the same checks.

The fields each schema version holds (core/snapshot.py's docstring says why): `dedup` from 7 on,
`seen` (the last ids) before; `reopened` from 6 on; `finished` from 4 on; each retention rule's state
(`RULE_STATES`) and a checkpoint's `preserved` since rules exist (null when unset).
"""

from __future__ import annotations

import json
from operator import attrgetter
from types import GenericAlias
from typing import Any, cast

import msgspec

from ckptlog.events.decoded import CheckpointConfig, RunStartedData, ValidationSpec
from ckptlog.events.retention_rules import RULE_STATES
from ckptlog.processor.core.dedup import Seen
from ckptlog.processor.core.ordering import SortedRecords
from ckptlog.processor.core.scoring import score
from ckptlog.processor.core.state import CheckpointRecord, Evicted, RunState, root_prefix


class CheckpointEntry(msgspec.Struct, gc=False):
    path: Any
    key: Any
    metrics: Any
    report_index: Any
    status: Any
    validation: ValidationSpec | None
    preserved: Any = None


class RunEntry(msgspec.Struct, gc=False):
    """A run's entry as written; every retention rule's state beside it (`_Entry`)."""

    config: CheckpointConfig
    storage_root: Any
    default_validation: ValidationSpec
    started: RunStartedData | None
    checkpoints: list[CheckpointEntry]
    latest: Any
    pending: Any
    report_count: Any
    generation: Any
    index_in_generation: Any
    outstanding: Any
    evictions: Any
    dedup: Any = msgspec.UNSET  # schema 7 on
    seen: Any = msgspec.UNSET  # schema 3 to 6
    finished: Any = None  # absent in schema 3
    reopened: Any = msgspec.UNSET  # schema 6 on


_Entry = cast(
    type[RunEntry],
    msgspec.defstruct("RunEntry", [(name, Any, None) for name in RULE_STATES], bases=(RunEntry,)),
)
"""The entry type decoded: `RunEntry` and a field per rule state (the rules' table names them)."""

ENTRIES: Any = GenericAlias(dict, (str, _Entry))
"""The type of a body's `runs` as decoded: run id -> entry."""

_decoder = msgspec.json.Decoder(_Entry)


def entry_of(value: Any) -> RunEntry:
    """An entry from a body decoded as typed (as is), or as plain JSON data (a dict, converted with
    the same checks: msgspec.ValidationError, a ValueError, when it is not an entry)."""
    if isinstance(value, RunEntry):
        return value
    return msgspec.convert(value, _Entry)


def decoded_entry(data: bytes) -> RunEntry:
    """An entry from its canonical bytes (a retired run's state: core/snapshot.py `retired_state`);
    by json.loads where msgspec refuses (NaN literals in metrics)."""
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError:
        return entry_of(json.loads(data))


def struct_out(struct: msgspec.Struct) -> Any:
    """A Struct as JSON-ready data: every field, as `model_dump()` wrote it before (same bytes)."""
    return msgspec.to_builtins(struct)


def run_out(run: RunState) -> dict[str, Any]:
    """One run's state as JSON-ready data (also what `fold --state` dumps)."""
    return {
        "config": struct_out(run.config),
        "storage_root": run.storage_root,
        "default_validation": struct_out(run.default_validation),
        "started": struct_out(run.started) if run.started is not None else None,
        "checkpoints": [
            {
                "path": r.path,
                "key": r.key,
                "metrics": r.metrics,
                "report_index": r.report_index,
                "status": r.status,
                "validation": struct_out(r.validation) if r.validation is not None else None,
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
        **{name: run.rule_state.get(name) for name in RULE_STATES},
        "finished": run.finished,
        "reopened": run.reopened,
    }


_SORT_KEY = attrgetter("sort_key")


def _records(entry: RunEntry) -> list[CheckpointRecord]:
    """The kept checkpoints, in sort order (as written; sorted again in case they are not)."""
    config, records = entry.config, []
    attribute, order = config.checkpoint_score_attribute, config.checkpoint_score_order
    for c in entry.checkpoints:
        has, value, _ = score(c.metrics, attribute, order)
        records.append(
            CheckpointRecord(
                c.path,
                c.key,
                c.metrics,
                c.report_index,
                c.status,
                c.validation,
                (has, value, c.report_index),
                c.preserved,
            )
        )
    if len(records) > 1:
        records.sort(key=_SORT_KEY)  # stable, and linear on the sorted list a snapshot holds
    return records


def run_in(run_id: str, entry: RunEntry, version: int, window: int = 0) -> RunState:
    """One run's entry (of schema `version`) as its state; `window`: the fold's dedup window, which a version 3 to 6
    entry's ids are read into. ValueError (KeyError for a field its version needs) when it is not one."""
    records = _records(entry)
    by_key = {record.key: record for record in records}
    if version >= 7:
        seen = Seen.of_data(_needed(entry.dedup, "dedup"), run_id)
    else:
        seen = Seen.of_ids(_needed(entry.seen, "seen"), run_id, window)
    finished = entry.finished
    if finished not in (None, "kept", "best"):
        raise ValueError(f"run {run_id!r}: finished is {finished!r}")
    reopened = _needed(entry.reopened, "reopened") if version >= 6 else 0
    if not isinstance(reopened, int) or isinstance(reopened, bool) or reopened < 0:
        raise ValueError(f"run {run_id!r}: reopened is {reopened!r}")
    root = entry.storage_root
    return RunState(
        run_id,
        entry.config,
        root,
        root_prefix(root),
        entry.default_validation,
        started=entry.started,
        checkpoints=SortedRecords.loaded(records),
        by_key=by_key,
        latest=by_key[entry.latest] if entry.latest is not None else None,
        pending={key: by_key[key] for key in entry.pending} if entry.pending else {},
        report_count=entry.report_count,
        generation=entry.generation,
        index_in_generation=entry.index_in_generation,
        seen=seen,
        outstanding={key: Evicted(path, eviction) for key, path, eviction in entry.outstanding}
        if entry.outstanding
        else {},
        evictions=int(entry.evictions),
        rule_state=_rule_state(entry),
        preserved_count=len(by_key) - [record.preserved for record in by_key.values()].count(None),
        finished=finished,
        reopened=reopened,
    )


def _rule_state(entry: RunEntry) -> dict[str, Any]:
    out = {}
    for name in RULE_STATES:
        value = getattr(entry, name)
        if value is not None:
            out[name] = value
    return out


def _needed(value: Any, name: str) -> Any:
    """A field the entry's schema version holds: KeyError when it is missing."""
    if value is msgspec.UNSET:
        raise KeyError(name)
    return value
