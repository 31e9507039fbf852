"""Per-run state of the fold: plain mutable records owned by the fold, snapshotted as data.

Configs, validation specs and a run's `run_started` data are the decoded Structs the events
carried (ckptlog/events/decoded.py): immutable, so the state shares them with the events."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ckptlog.events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH
from ckptlog.events.decoded import CheckpointConfig, RunStartedData, ValidationSpec
from ckptlog.events.paths import UnsafePath, canonical_below, child, key_of, parse_url
from ckptlog.events.retention_rules import RetentionRule, active
from ckptlog.processor.core.dedup import Seen
from ckptlog.processor.core.nesting import Nesting
from ckptlog.processor.core.ordering import SortedRecords
from ckptlog.processor.core.scoring import SortKey

DEFAULT_DEDUP_WINDOW = 4096
DEFAULT_FINISHED_RUNS_KEPT = 10_000


@dataclass(frozen=True, slots=True)
class FoldSettings:
    """Processor defaults; part of every snapshot because they change what a log folds to.

    `default_root` is the directory implicit runs (no run_started) get their own root below:
    `{default_root}/{run id}`. The decode limits decide which records are applied, so they are
    fold settings too (contract §6: a snapshot folded with other limits is refused)."""

    # metadata "flag": the setting that sets it, named when a snapshot's differs (settings_diff.py);
    # "root": compared by canonical spelling. Snapshots write every field (snapshot.py).
    default_config: CheckpointConfig = field(default_factory=CheckpointConfig, metadata={"flag": "defaults"})
    default_root: str | None = field(default=None, metadata={"flag": "--storage-root", "root": True})
    outer_root: str | None = field(
        default=None, metadata={"flag": "--storage-root (outer bound of deletions)", "root": True}
    )
    default_validation: ValidationSpec = field(
        default_factory=ValidationSpec, metadata={"flag": "the default validation spec"}
    )
    dedup_window: int = field(default=DEFAULT_DEDUP_WINDOW, metadata={"flag": "the dedup window"})
    max_payload_bytes: int = field(default=DEFAULT_MAX_BYTES, metadata={"flag": "--max-payload-bytes"})
    max_depth: int = field(default=DEFAULT_MAX_DEPTH, metadata={"flag": "--max-depth"})
    # contract §3 "Finished runs": the newest this many retired runs keep their record (id, root, state); older expire
    finished_runs_kept: int = field(default=DEFAULT_FINISHED_RUNS_KEPT, metadata={"flag": "--finished-runs-kept"})


@dataclass(slots=True, eq=False)
class CheckpointRecord:
    path: str
    key: str  # normalised path: identity within the run
    metrics: dict[str, Any]
    report_index: int
    status: str
    validation: ValidationSpec | None
    sort_key: SortKey
    preserved: str | None = None  # the label of the retention rule that kept it for good (retention beyond Ray)


def new_checkpoint_list() -> SortedRecords:
    return SortedRecords()


class Evicted(NamedTuple):
    """An eviction whose deletion is not yet settled: the path to delete and which eviction of
    the run it was (a path can be reported, evicted and deleted more than once)."""

    path: str
    eviction: int


@dataclass(slots=True, eq=False)
class RunState:
    run_id: str
    config: CheckpointConfig
    storage_root: str | None
    root_prefix: str  # canonical root + '/': a checkpoint key must start with it
    default_validation: ValidationSpec
    started: RunStartedData | None = None
    checkpoints: SortedRecords = field(default_factory=new_checkpoint_list)
    by_key: dict[str, CheckpointRecord] = field(default_factory=dict)
    latest: CheckpointRecord | None = None
    pending: dict[str, CheckpointRecord] = field(default_factory=dict)
    report_count: int = 0
    generation: int = 0
    index_in_generation: int = 0
    seen: Seen = field(default_factory=Seen)  # the ids it applied (contract §3 "Deduplication")
    # normalised key -> eviction not yet settled, in eviction order (additions only ever append)
    outstanding: dict[str, Evicted] = field(default_factory=dict)
    evictions: int = 0  # evictions so far: the next one's number
    # each retention rule's state under its name (retention_rules.py); replaced, never changed in place
    rule_state: dict[str, Any] = field(default_factory=dict)
    preserved_count: int = 0  # kept checkpoints preserved for good: not counted against num_to_keep
    finished: str | None = None  # run_finished's `keep` once the run finished (contract §3 "Finished runs")
    reopened: int = 0  # run_reopened events applied: the run's epoch, which its finish and reopen ids name
    keep: int | None = field(init=False)  # copies of config fields, read on every report
    score_attribute: str | None = field(init=False)
    rules: tuple[RetentionRule, ...] = field(init=False)  # the retention rules beyond Ray its config sets
    preserving: bool = field(init=False)  # one is set
    is_own_key: Callable[[str], object] = field(init=False)  # canonical and below the root?
    nesting: Nesting = field(init=False)  # derived from the live keys (kept and outstanding)
    # a restored run not built yet (core/run_codec.py `DormantRun`): its snapshot entry; unset once built
    entry: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.keep = self.config.num_to_keep
        self.score_attribute = self.config.checkpoint_score_attribute
        self.rules = _rules_of(self.config)
        self.preserving = bool(self.rules)
        self.is_own_key = canonical_below(self.root_prefix)
        self.rebuild_nesting()

    @property
    def root(self) -> str:
        """The run's canonical root without the trailing slash (`root_prefix[:-1]`): the key under
        which its root is registered (`Roots.owners`, nesting) and claimed (storage/claims.py)."""
        return self.root_prefix[:-1]

    def is_live(self, key: str) -> bool:
        """Kept (latest and pending included), or evicted and not yet settled in storage."""
        return key in self.by_key or key in self.outstanding

    def live_keys(self) -> list[str]:
        return [*self.by_key, *self.outstanding]

    def nested(self, key: str) -> str | None:
        """A live key equal to, above or below `key` (contract §9 `nested_checkpoint_path`)."""
        if key in self.by_key or key in self.outstanding:  # is_live, inline: once per checkpoint report
            return key
        nesting = self.nesting
        if key.find("/", nesting.start) < 0 and key not in nesting.below:  # the common checkpoint: directly
            return None  # below the root (no directory of its own to be inside of) and nothing registered below it
        return nesting.around(key, self.is_live, self.live_keys)

    # what the paths after a restore read of every run: a run not built yet answers them from its entry
    # (core/run_codec.py `DormantRun`), without being built

    def kept_paths(self) -> list[str]:
        """The kept checkpoints' paths, in sort order."""
        return [r.path for r in self.checkpoints]

    def owed_evictions(self) -> Collection[Evicted]:
        """The evictions not settled yet, in eviction order."""
        return self.outstanding.values()

    def live_counts(self) -> tuple[int, int, int]:
        """How many checkpoints it keeps, how many of them are pending, how many evictions are not settled."""
        return len(self.by_key), len(self.pending), len(self.outstanding)

    def rebuild_nesting(self) -> None:
        """The nesting index anew from the live keys (after a restore or a rollback)."""
        self.nesting = Nesting(len(self.root_prefix), self.live_keys())

    @property
    def validated(self) -> int:
        """contract §4: the smallest pending report index, else `report_count`. The one place it is
        computed: the watermark output and the view both read it. `pending` holds records in
        report order (they are only ever added as reported), so the first is the smallest."""
        if self.pending:
            return next(iter(self.pending.values())).report_index
        return self.report_count


_RULES_OF: dict[CheckpointConfig, tuple[RetentionRule, ...]] = {}
"""`active(config)` of the configs seen: a restore of 100,000 runs, most sharing a config, asks it for each."""


def _rules_of(config: CheckpointConfig) -> tuple[RetentionRule, ...]:
    rules = _RULES_OF.get(config)
    if rules is None:
        if len(_RULES_OF) >= 4096:
            _RULES_OF.clear()
        rules = _RULES_OF[config] = active(config)
    return rules


def root_prefix(root: str | None) -> str:
    """Canonical spelling of a storage root plus `/`; '\0' (matches nothing) when there is none."""
    if not root:
        return "\0"
    parent, _, name = root.rpartition("/")
    if _PLAIN_NAME.fullmatch(name) and parent and not parent.endswith("/"):
        known = _PARENTS.get(parent)
        if known is None:
            known = _canonical_parent(parent)
        if known:
            return known + name + "/"
    return key_of(parse_url(root)).rstrip("/") + "/"


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}")
"""A last segment that canonicalises to itself and is safe (no dot first: not `.`, `..` or the marker)."""
_PARENTS: dict[str, str] = {}
"""Canonical spelling (plus `/`) of the parents of roots seen, '' where the shortcut does not hold:
runs' roots mostly share a parent, and a restore of 100,000 runs spent a third of its time parsing
them whole. `root_prefix` of `parent/name` is `_PARENTS[parent] + name + "/"` for a plain name
(tests/unit/core/test_delta.py checks it against the whole parse)."""


def _canonical_parent(parent: str) -> str:
    try:
        key = key_of(parse_url(parent))
    except UnsafePath:
        key = ""
    known = key + "/" if key and not key.endswith("/") else ""  # a parent with no segment: no shortcut
    if len(_PARENTS) >= 4096:
        _PARENTS.clear()
    _PARENTS[parent] = known
    return known


def implicit_root(settings: FoldSettings, run_id: str) -> str | None:
    """The root of a run without run_started: a directory of its own below the default root
    (the caller has checked that the run id is one safe path segment), or None without one."""
    return child(settings.default_root, run_id) if settings.default_root else None


def new_run(run_id: str, settings: FoldSettings, started: RunStartedData | None = None) -> RunState:
    """A run from its run_started event, or from the processor defaults when it has none."""
    if started is None:
        root = implicit_root(settings, run_id)
        return RunState(run_id, settings.default_config, root, root_prefix(root), settings.default_validation)
    return RunState(
        run_id,
        started.checkpoint_config,
        started.storage_path,
        root_prefix(started.storage_path),
        started.validation,
        started=started,
    )
