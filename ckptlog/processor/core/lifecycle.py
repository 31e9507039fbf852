"""A run's lifecycle in the fold: run_started, worker-group restarts (explicit, and implicit by a
newer generation's report), and the settling of evictions in storage (contract §2–3, §9).

These events are rare next to reports; they live here so that ckptlog/processor/core/fold.py holds
the hot path. Like every handler they decide each rejection before mutating anything and push
the inverse of each mutation to the fold's journal (ckptlog/processor/core/journal.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ckptlog.events.decoded import DeletionCompleted, RunStarted, WorkerGroupRestart
from ckptlog.events.outputs import CHECKPOINTS_DELETED, WORKER_GROUP_STARTED
from ckptlog.events.paths import UnsafePath, normalize
from ckptlog.events.rejections import Rejection
from ckptlog.processor.core import finishing, linked_roots, reopening
from ckptlog.processor.core import journal as undo
from ckptlog.processor.core.nesting import Nesting
from ckptlog.processor.core.outputs import (
    NOTHING,
    Effects,
    Output,
    deletion_refused,
    output,
    rejected,
    warning,
    watermark,
)
from ckptlog.processor.core.rejections import (
    check_root,
    conflict,
    implicit_root_problem,
    nested_implicit_root,
    nested_root,
)
from ckptlog.processor.core.state import Evicted, RunState, implicit_root, new_run, root_prefix

if TYPE_CHECKING:
    from ckptlog.processor.core.fold import Fold


class Roots:
    """The storage root of every run of this fold, started or implicit (canonical -> run id): no
    two may nest (contract §9), so no run's deletion can reach into another run's root. Together
    with each run's own nesting index (its checkpoints strictly below its root) this is the one
    index of live paths and roots across a partition's runs. `history` (for the offline sharded
    fold, ckptlog/processor/foldfile.py) lists every root ever registered or looked up, in order: a run
    refused for nesting names the run it nests with, so an attempt counts as much as a root."""

    __slots__ = ("fresh", "history", "nesting", "owners")

    def __init__(self, runs: Iterable[RunState] = (), *, history: bool = False) -> None:
        self.owners: dict[str, str] = {}
        self.nesting = Nesting()
        self.history: list[tuple[str, str]] | None = [] if history else None
        self.fresh: list[tuple[str, str]] | None = None  # set to a list: roots added since `claimed()`
        registered = [(run.root, run.run_id) for run in runs if run.storage_root is not None]
        if self.history is not None:
            for root, run_id in registered:
                self.add(root, run_id)
            return
        self.owners.update(registered)  # what `add` of each does, in bulk (a restore of 100,000 runs)
        self.nesting.add_all(root for root, _ in registered)

    def add(self, root: str, run_id: str) -> None:
        self.owners[root] = run_id
        self.nesting.add(root)
        if self.history is not None:
            self.history.append((root, run_id))
        if self.fresh is not None:
            self.fresh.append((root, run_id))

    def claimed(self) -> list[tuple[str, str]]:
        """The roots added since the last call that are still registered (a rolled-back event's are
        not), for the service to write their claims (ckptlog/processor/storage/claim_writer.py)."""
        fresh, self.fresh = self.fresh or [], []
        return [(root, run_id) for root, run_id in fresh if self.owners.get(root) == run_id]

    def remove(self, root: str) -> None:
        del self.owners[root]
        self.nesting.discard(root)

    def nested(self, root: str, run_id: str) -> str | None:
        """A run other than `run_id` whose root is equal to, above or below `root` (None: none).
        Roots never nest, so at most one is equal or above; of several below, the smallest run id:
        the answer (a rejection names it) never depends on `owners`' order, which a restore
        rebuilds from the runs table, not in registration order (contract §9)."""
        if self.history is not None:
            self.history.append((root, run_id))
        owners = self.owners
        owner = owners.get(root)
        if owner is not None and owner != run_id:
            return owner
        at = root.find("/")
        while at > 0:  # above: a registered root among root's directories
            owner = owners.get(root[:at])
            if owner is not None and owner != run_id:
                return owner
            at = root.find("/", at + 1)
        if root in self.nesting.below:  # below: rare (a root above others), so a scan is fine
            prefix = root + "/"
            return min((o for r, o in owners.items() if r.startswith(prefix) and o != run_id), default=None)
        return None


def implicit_problem(fold: Fold, run_id: str) -> Rejection | None:
    """Why a run without run_started may not be created now (contract §3, §9), else None: its id
    cannot name a directory, or its root nests with another run's."""
    default = fold.settings.default_root
    if default is None:
        return None
    problem = implicit_root_problem(run_id, default)
    if problem is not None:
        return problem
    root = root_prefix(implicit_root(fold.settings, run_id))[:-1]
    other = fold.roots.nested(root, run_id)
    return None if other is None else nested_implicit_root(run_id, root, other)


def run_started(fold: Fold, event: RunStarted, run: RunState | None) -> Effects:
    data, run_id = event.data, event.subject
    if run is not None and run.started == data:
        return NOTHING  # identical repeat: a no-op (contract §2)
    if run is not None and (run.started is not None or run.latest is not None or run.outstanding):
        return rejected(conflict(run_id, run.started is not None))
    problem = check_root(run_id, data.storage_path, fold.settings.outer_root)
    root = "" if problem is not None else normalize(data.storage_path)
    other = None if problem is not None else fold.roots.nested(root, run_id)
    if other is not None:
        problem = nested_root(run_id, data.storage_path, other)
    if problem is not None:  # the run is refused, not folded under another root (contract §3)
        _set(fold, fold.refused, run_id, f"{problem.reason} for storage_path {data.storage_path!r}")
        return rejected(problem)
    fresh = new_run(run_id, fold.settings, data)
    if run is not None:  # implicitly created by metric-only reports or a restart
        fresh.report_count, fresh.generation = run.report_count, run.generation
        fresh.index_in_generation = run.index_in_generation
        fresh.seen = run.seen
        if run.storage_root is not None:  # its implicit root is free again
            fold.journal.push((undo.CALL, lambda r: fold.roots.add(r, run_id), run.root))
            fold.roots.remove(run.root)
    if run_id in fold.refused:  # undone in its place: the table is written in order
        at = list(fold.refused).index(run_id)
        fold.journal.push((undo.CALL, undo.put_at, (fold.refused, at, run_id, fold.refused.pop(run_id))))
    fold.journal.push((undo.RUN, fold.runs, run_id, run))
    fold.runs[run_id] = fresh
    fold.journal.push((undo.CALL, fold.roots.remove, root))
    fold.roots.add(root, run_id)
    return Effects([watermark(fresh)])


def _set(fold: Fold, table: dict[str, str], key: str, value: str) -> None:
    """table[key] = value, with its inverse in the journal."""
    before = table.get(key)
    fold.journal.push((undo.NEW, table, key) if before is None else (undo.OLD, table, key, before))
    table[key] = value


def restart(fold: Fold, event: WorkerGroupRestart, run: RunState | None) -> Effects:
    """contract §3: a restart for a generation the run already reached is a no-op with a warning."""
    data, run_id = event.data, event.subject
    if run is not None and data.generation is not None and data.generation <= run.generation:
        message = (
            f"run {run_id!r}: worker_group_restart for generation {data.generation}, but the run is at generation "
            f"{run.generation} already (a newer worker group's report may have started it); ignored"
        )
        return Effects([warning("restart_not_newer", message)])
    if run is None:
        problem = implicit_problem(fold, run_id)
        if problem is not None:
            return rejected(problem)
        run = fold.run_of(run_id)
    outputs = [_start_generation(run, data.generation or run.generation + 1, data.num_workers)]
    outputs.append(watermark(run))
    return Effects(outputs)


def implicit_restart(fold: Fold, run: RunState, generation: int | None) -> list[Output]:
    """A report from a newer generation moves the run there first, exactly as a restart would
    (the controller's restart event may land after the new workers' first report)."""
    if generation is None or generation <= run.generation:
        return []
    return [_start_generation(run, generation, None)]


def _start_generation(run: RunState, generation: int, num_workers: int | None) -> Output:
    run.generation = generation
    run.index_in_generation = 0
    started = {
        "generation": generation,
        "report_count": run.report_count,
        "latest_checkpoint_path": run.latest.path if run.latest else None,
        "num_workers": num_workers,
    }
    return output(WORKER_GROUP_STARTED, started)


def deletion_completed(fold: Fold, event: DeletionCompleted, run: RunState | None) -> Effects:
    """Evictions settled in storage leave `outstanding` (their paths are free again). A
    completion names the eviction it settles, so an old one never settles a newer eviction of
    the same path; a refused deletion is final and says so in a `warning`."""
    if run is None:
        return NOTHING
    data, outputs = event.data, []
    deleted = [e.checkpoint_path for e in data.deleted if _settle(fold, run, e.checkpoint_path, e.eviction)]
    if deleted:
        outputs.append(output(CHECKPOINTS_DELETED, {"checkpoint_paths": deleted}))
    for entry in data.refused:
        if _settle(fold, run, entry.checkpoint_path, entry.eviction):
            outputs.append(deletion_refused(run.run_id, entry.checkpoint_path, entry.reason))
    finishing.retire_if_settled(fold, run)  # a finished run leaves once nothing is owed
    return Effects(outputs) if outputs else NOTHING


def idempotent(event: DeletionCompleted) -> bool:
    """A completion naming the eviction of every entry (all the processor writes now) settles only
    those evictions, each numbered once in the run: applied again it changes nothing and says
    nothing, so the run need not remember its id (contract §3 "Deduplication"). One of v1/v2
    (upcast with no number) would settle a later eviction of a reused path: its id is remembered."""
    data = event.data
    return all(e.eviction is not None for e in data.deleted) and all(e.eviction is not None for e in data.refused)


def _key_of(run: RunState, path: str) -> str:
    """The run's key of `path` as a completion or the deleter names it (raises UnsafePath). The
    processor writes the key itself (the canonical spelling), so an outstanding key is looked up as it
    is: no pattern match or parse per settled path (a key is canonical, and normalising it gives it back)."""
    return path if path in run.outstanding or run.is_own_key(path) else normalize(path)


def owed_key(run: RunState, path: str) -> str | None:
    """`_key_of`, None for an unsafe path."""
    try:
        return _key_of(run, path)
    except UnsafePath:
        return None


def owed(run: RunState, path: str) -> tuple[str, Evicted] | None:
    """The outstanding key and eviction `path` names, as a completion or the deleter spells it (None:
    not outstanding, or unsafe). The key as the processor wrote it is tried first: no parse per path."""
    outstanding = run.outstanding
    evicted = outstanding.get(path)
    if evicted is not None:
        return path, evicted
    key = owed_key(run, path)
    evicted = None if key is None else outstanding.get(key)
    return None if key is None or evicted is None else (key, evicted)


def _settle(fold: Fold, run: RunState, path: str, eviction: int | None) -> bool:
    """Drop one outstanding eviction when the completion names it; False when it does not
    (already settled, a retried completion, or an older eviction of the same path)."""
    found = owed(run, path)
    if found is None:
        return False
    key, evicted = found
    if eviction is not None and evicted.eviction != eviction:
        return False
    outstanding = run.outstanding
    fold.journal.push((undo.OLD, outstanding, key, evicted))
    del outstanding[key]
    run.nesting.discard(key)
    return True


def deletion_problem(run: RunState | None, path: str) -> str | None:
    """Why the run's current state does not owe deleting `path` now, or None (contract §9: the
    deleter asks immediately before it deletes). Owed means outstanding, not kept again, and
    nesting with no other live path — the fold refuses nesting, but a state restored from an
    older build's snapshot may hold it, and a deletion removes a whole tree."""
    if run is None:
        return "the run is not in this partition's state"
    try:
        key = _key_of(run, path)
    except UnsafePath as exc:
        return f"unsafe path: {exc}"
    if key in run.by_key:
        return "it is live again (reported after its eviction)"
    if key not in run.outstanding:
        return "the run no longer owes this deletion (already settled)"
    if key in run.nesting.below:
        below = min((k for k in run.live_keys() if k.startswith(key + "/")), default=key + "/…")  # order-free
        return f"the live checkpoint {below} lies inside it"
    at = key.find("/", run.nesting.start)
    while at > run.nesting.start:
        if run.is_live(key[:at]):
            return f"it lies inside the live checkpoint {key[:at]}"
        at = key.find("/", at + 1)
    return None


# The finished-run handlers the input table names (ckptlog/events/decoded.py `INPUT_KINDS`: "lifecycle.run_finished",
# "lifecycle.run_forgotten", "lifecycle.run_reopened"); they live in ckptlog/processor/core/finishing.py and
# reopening.py.
run_finished = finishing.run_finished
run_forgotten = finishing.run_forgotten
# The handler of the processor's `root_refused` fact (contract §9 *Roots behind a symlink*) lives in
# ckptlog/processor/core/linked_roots.py.
root_refused = linked_roots.root_refused
run_reopened = reopening.run_reopened
