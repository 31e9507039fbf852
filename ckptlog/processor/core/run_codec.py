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
from collections.abc import Collection, Iterable, Sequence
from functools import partial
from itertools import pairwise
from operator import attrgetter
from types import GenericAlias
from typing import Annotated, Any, SupportsIndex, cast

import msgspec

from ckptlog.errors import SnapshotCorrupt
from ckptlog.events.decoded import CheckpointConfig, RunStartedData, ValidationSpec
from ckptlog.events.paths import UnsafePath, is_canonical_below, normalize
from ckptlog.events.retention_rules import RULE_STATES
from ckptlog.processor.core.dedup import Seen
from ckptlog.processor.core.ordering import SortedRecords
from ckptlog.processor.core.scoring import SortKey, score
from ckptlog.processor.core.state import CheckpointRecord, Evicted, RunState, root_prefix

DEDUP_VERSION = 7
"""The schema version whose entries hold `dedup` (before: `seen`), and the first whose runs restore dormant."""


REPORT_INDEX = Annotated[int, msgspec.Meta(ge=0, lt=2**62)]
"""A report index as the fold makes them (the run's report counter, from 0), in the range the kept list's
`(value, 2**62 | report_index)` keys hold (core/ordering.py): outside it, a restore's snapshot is corrupt."""


COUNT = Annotated[int, msgspec.Meta(ge=0)]
"""A run's generation or its reports in the generation: a count from 0 (a restart may name any generation)."""


class CheckpointEntry(msgspec.Struct, gc=False):
    path: str
    key: str
    metrics: dict[str, Any]
    report_index: REPORT_INDEX
    status: str
    validation: ValidationSpec | None
    preserved: str | None = None


class RunEntry(msgspec.Struct, gc=False):
    """A run's entry as written; every retention rule's state beside it (`_Entry`)."""

    config: CheckpointConfig
    storage_root: str | None
    default_validation: ValidationSpec
    started: RunStartedData | None
    checkpoints: list[CheckpointEntry]
    latest: str | None
    pending: list[str]
    report_count: Annotated[int, msgspec.Meta(ge=0, le=2**62)]  # the next report's index
    generation: COUNT
    index_in_generation: COUNT
    outstanding: list[tuple[str, str, int]]
    evictions: int
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
    """One run's state as JSON-ready data: its snapshot entry (`snapshot.run_entry`); a dormant run's from its
    entry, not built (`DormantRun`: the same data)."""
    if run.__class__ is DormantRun:
        entry: RunEntry = run.entry
        outstanding = [list(evicted) for evicted in entry.outstanding]  # lists, as a built run's: the same data
        return _out(entry, entry.checkpoints, entry.latest, entry.pending, run.seen, outstanding, entry)
    latest = run.latest.key if run.latest is not None else None
    outstanding = [[key, path, eviction] for key, (path, eviction) in run.outstanding.items()]
    return _out(run, run.checkpoints, latest, list(run.pending), run.seen, outstanding, run.rule_state)


def _out(
    head: RunState | RunEntry,
    checkpoints: Iterable[CheckpointRecord | CheckpointEntry],
    latest: str | None,
    pending: list[str],
    seen: Seen,
    outstanding: Sequence[Sequence[Any]],
    rules: RunEntry | dict[str, Any],
) -> dict[str, Any]:
    """The entry's wire shape, written once: `head`'s fields the state and its entry hold alike, the others
    given; `rules`: each retention rule's state, under its name (a dict) or as an attribute (an entry)."""
    rule = rules.get if isinstance(rules, dict) else partial(getattr, rules)
    return {
        "config": struct_out(head.config),
        "storage_root": head.storage_root,
        "default_validation": struct_out(head.default_validation),
        "started": struct_out(head.started) if head.started is not None else None,
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
            for r in checkpoints
        ],
        "latest": latest,
        "pending": pending,
        "report_count": head.report_count,
        "generation": head.generation,
        "index_in_generation": head.index_in_generation,
        "dedup": seen.data(),
        "outstanding": outstanding,
        "evictions": head.evictions,
        **{name: rule(name) for name in RULE_STATES},
        "finished": head.finished,
        "reopened": head.reopened,
    }


_SORT_KEY = attrgetter("sort_key")


def _sort_keys(entry: RunEntry) -> list[SortKey]:
    """Each kept checkpoint's sort key (core/scoring.py), in the entry's order."""
    attribute, order = entry.config.checkpoint_score_attribute, entry.config.checkpoint_score_order
    keys = []
    for c in entry.checkpoints:
        has, value, _ = score(c.metrics, attribute, order)
        keys.append((has, value, c.report_index))
    return keys


def _records(entry: RunEntry) -> list[CheckpointRecord]:
    """The kept checkpoints, in sort order (as written; sorted again in case they are not)."""
    records = [
        CheckpointRecord(c.path, c.key, c.metrics, c.report_index, c.status, c.validation, sort_key, c.preserved)
        for c, sort_key in zip(entry.checkpoints, _sort_keys(entry), strict=True)
    ]
    if len(records) > 1:
        records.sort(key=_SORT_KEY)  # stable, and linear on the sorted list a snapshot holds
    return records


def run_in(
    run_id: str,
    entry: RunEntry,
    version: int,
    window: int = 0,
    *,
    seen: Seen | None = None,
    into: RunState | None = None,
) -> RunState:
    """One run's entry (of schema `version`) as its state; `window`: the fold's dedup window, which a version 3 to 6
    entry's ids are read into. ValueError (KeyError for a field its version needs) when it is not one. `seen`: its
    dedup state read already (`seen_of`); `into`: a RunState to build it in (a dormant run waking: `wake`)."""
    records = _records(entry)
    by_key = {record.key: record for record in records}
    if seen is None:
        seen = seen_of(run_id, entry, version, window)
    finished, reopened = _lifecycle_of(run_id, entry, version)
    root = entry.storage_root
    run = RunState.__new__(RunState) if into is None else into
    RunState.__init__(
        run,
        run_id,
        entry.config,
        root,
        root_prefix(root) if into is None else into.root_prefix,
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
        evictions=entry.evictions,
        rule_state=_rule_state(entry),
        preserved_count=len(by_key) - [record.preserved for record in by_key.values()].count(None),
        finished=finished,
        reopened=reopened,
    )
    return run


def seen_of(run_id: str, entry: RunEntry, version: int, window: int) -> Seen:
    """The entry's dedup state: `dedup` from schema 7 on, else its `seen` ids read into `window`."""
    if version >= DEDUP_VERSION:
        return Seen.of_data(_needed(entry.dedup, "dedup"), run_id)
    return Seen.of_ids(_needed(entry.seen, "seen"), run_id, window)


def _lifecycle_of(run_id: str, entry: RunEntry, version: int) -> tuple[str | None, int]:
    """The entry's `finished` and `reopened` (0 before schema 6), checked."""
    finished = entry.finished
    if finished not in (None, "kept", "best"):
        raise ValueError(f"run {run_id!r}: finished is {finished!r}")
    reopened = _needed(entry.reopened, "reopened") if version >= 6 else 0
    if not isinstance(reopened, int) or isinstance(reopened, bool) or reopened < 0:
        raise ValueError(f"run {run_id!r}: reopened is {reopened!r}")
    return finished, reopened


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


def restored_run(run_id: str, entry: RunEntry, version: int, window: int) -> RunState:
    """A run of a snapshot being restored: dormant (`DormantRun`) when its entry is in the form this build
    writes, else built at once (checked, as every entry is: ValueError, KeyError when it is not one)."""
    prefix = checked_prefix(run_id, entry)
    if version < DEDUP_VERSION or not _as_written(entry):
        return run_in(run_id, entry, version, window)
    seen = seen_of(run_id, entry, version, window)  # checked now, kept: the one part whose check builds it
    finished, reopened = _lifecycle_of(run_id, entry, version)
    run = RunState.__new__(RunState)  # its fields set as a plain run's, then dormant: no `wake` on the way
    run.run_id, run.storage_root, run.root_prefix, run.seen = run_id, entry.storage_root, prefix, seen
    run.finished, run.reopened, run.entry = finished, reopened, entry
    run.__class__ = DormantRun
    return run


def checked_prefix(run_id: str, entry: RunEntry) -> str:
    """The entry's `root_prefix`, once its root is checked (UnsafePath) and, for a run with a root, each
    kept and each evicted checkpoint's key: ValueError unless it is a canonical spelling strictly under
    the root and its path spells it, as the fold makes them (contract §6). The deleter removes a path's
    canonical spelling, and its re-check (lifecycle.deletion_problem) finds what is kept and what is owed
    by key, so a key spelled otherwise (`root//b` for the kept `root/b`) would let an eviction delete a
    kept checkpoint (contract §9). Asked of every entry a restore reads and of a retired state reopened."""
    prefix = root_prefix(entry.storage_root)
    if entry.storage_root:
        _check_keys(run_id, entry, prefix)
    return prefix


def _check_keys(run_id: str, entry: RunEntry, prefix: str) -> None:
    for c in entry.checkpoints:
        if not _spelled(c.key, c.path, prefix):
            raise _misspelt(run_id, c.key, c.path, prefix)
    for key, path, _ in entry.outstanding:
        if not _spelled(key, path, prefix):
            raise _misspelt(run_id, key, path, prefix)


def _spelled(key: str, path: str, prefix: str) -> bool:
    """`key` canonical and strictly under `prefix`, `path` a spelling of it: one regex match in the common
    case (the path is the key), a parse only for an unusual spelling."""
    if path == key and is_canonical_below(prefix, key):
        return True
    return len(key) > len(prefix) and key.startswith(prefix) and _canonical(key) == key == _canonical(path)


def _misspelt(run_id: str, key: str, path: str, prefix: str) -> ValueError:
    return ValueError(
        f"run {run_id!r}: checkpoint key {key!r} (path {path!r}) is not the canonical spelling of its "
        f"path strictly under the run's root {prefix[:-1]!r}"
    )


def _canonical(path: str) -> str | None:
    try:
        return normalize(path)
    except UnsafePath:
        return None


def _as_written(entry: RunEntry) -> bool:
    """Whether `run_in` of the entry cannot fail but in its dedup state, lifecycle or root (checked
    by `restored_run`) and writes back the same entry: its checkpoints in sort order with distinct
    keys, its latest and pending ones among them (pending once each), its evictions' keys distinct.
    Its fields' types are msgspec's to check (`RunEntry`)."""
    checkpoints = entry.checkpoints
    keys = {c.key for c in checkpoints}
    if len(keys) != len(checkpoints) or (entry.latest is not None and entry.latest not in keys):
        return False
    pending, outstanding = entry.pending, entry.outstanding
    if pending and (len(set(pending)) != len(pending) or not keys.issuperset(pending)):
        return False
    if len(outstanding) > 1 and len({key for key, _, _ in outstanding}) != len(outstanding):
        return False
    if len(checkpoints) > 1:
        sort_keys = _sort_keys(entry)
        return all(a <= b for a, b in pairwise(sort_keys))
    return True


class DormantRun(RunState):
    """A restored run whose state is built on first use (contract §6 *Dormant runs*): `restored_run` sets
    its id, root, dedup state, lifecycle and entry; reading any other field, or writing any, builds the
    rest from the entry (`wake`), and from then on it is a plain `RunState` (its class changed back), whose
    fields the fold reads as fast as any run's. What the paths after a restore read of every run
    (kept paths, evictions owed, counts; `run_out` for a snapshot) it answers from the entry unbuilt.

    A subclass, not a `__getattr__` on RunState: on CPython 3.11 a class with `__getattr__` loses the
    specialised attribute reads (LOAD_ATTR_SLOT), ~2x slower on every read of every run."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        wake(self)
        return getattr(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        wake(self)
        setattr(self, name, value)

    def __delattr__(self, name: str) -> None:
        wake(self)
        delattr(self, name)

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        wake(self)
        return self.__reduce_ex__(protocol)

    def kept_paths(self) -> list[str]:
        return [c.path for c in self.entry.checkpoints]  # in sort order: `_as_written`

    def owed_evictions(self) -> Collection[Evicted]:
        return [Evicted(path, eviction) for _, path, eviction in self.entry.outstanding]

    def live_counts(self) -> tuple[int, int, int]:
        entry = self.entry
        return len(entry.checkpoints), len(entry.pending), len(entry.outstanding)


def wake(run: RunState) -> None:
    """Build a dormant run's state in place, from its entry; a plain RunState from then on. Its entry was
    checked at restore (`restored_run`), so this cannot fail but by a bug: then SnapshotCorrupt naming
    the run, the run left dormant (every field it had set holds what the build gives it)."""
    get = object.__getattribute__  # the slots as they are: no `__getattr__` again
    run_id, entry, seen = get(run, "run_id"), get(run, "entry"), get(run, "seen")
    object.__setattr__(run, "__class__", RunState)
    try:
        run_in(run_id, entry, DEDUP_VERSION, seen=seen, into=run)
    except Exception as exc:
        object.__setattr__(run, "__class__", DormantRun)
        raise SnapshotCorrupt(
            f"run {run_id!r}: its restored entry passed the restore's checks but its state cannot be built "
            f"({exc!r}); a bug: report it, and restore from an older snapshot or `ckptlog replay`"
        ) from exc
    del run.entry
