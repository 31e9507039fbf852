"""A run's lifecycle in the fold: run_started, worker-group restarts (explicit, and implicit by a
newer generation's report), and the settling of evictions in storage (contract §2–3, §9).

These events are rare next to reports; they live here so that processor/core/fold.py holds
the hot path. Like every handler they decide each rejection before mutating anything and push
the inverse of each mutation to the fold's journal (processor/core/journal.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from events.decoded import DeletionCompleted, RunStarted, WorkerGroupRestart
from processor.core import journal as undo
from processor.core.nesting import Nesting
from processor.core.outputs import NOTHING, Effects, Output, rejected, warning, watermark
from processor.core.paths import UnsafePath, normalize
from processor.core.rejections import check_root, conflict, nested_root
from processor.core.state import RunState, new_run

if TYPE_CHECKING:
    from processor.core.fold import Fold


class Roots:
    """The storage roots of the runs started explicitly in this fold (canonical -> run id): no
    two may nest (contract §9). Runs without run_started share the processor's --storage-root and
    are not registered (docs/processor.md says what that means for a deployment)."""

    __slots__ = ("nesting", "owners")

    def __init__(self, runs: Iterable[RunState] = ()) -> None:
        self.owners: dict[str, str] = {}
        self.nesting = Nesting()
        for run in runs:
            if run.started is not None:
                self.add(normalize(run.started.storage_path), run.run_id)

    def add(self, root: str, run_id: str) -> None:
        self.owners[root] = run_id
        self.nesting.add(root)

    def remove(self, root: str) -> None:
        del self.owners[root]
        self.nesting.discard(root)

    def nested(self, root: str, run_id: str) -> str | None:
        """The run whose root is equal to, above or below `root`, other than `run_id` (None: none)."""
        owners = self.owners
        other = self.nesting.nested(root, owners.__contains__, owners.__iter__)
        if other is None:
            return None
        owner = owners.get(other, other)
        return None if owner == run_id else owner


def run_started(fold: Fold, event: RunStarted, run: RunState | None) -> Effects:
    data, run_id = event.data, event.subject
    problem = check_root(run_id, data.storage_path, fold.settings.outer_root)
    if problem is not None:
        return rejected(problem)
    if run is not None and run.started == data:
        return NOTHING  # identical repeat: a no-op (contract §2)
    if run is not None and (run.started is not None or run.latest is not None or run.outstanding):
        return rejected(conflict(run_id, run.started is not None))
    root = normalize(data.storage_path)
    other = fold.roots.nested(root, run_id)
    if other is not None:
        return rejected(nested_root(run_id, data.storage_path, other))
    fresh = new_run(run_id, fold.settings, data)
    if run is not None:  # implicitly created by metric-only reports or a restart
        fresh.report_count, fresh.generation = run.report_count, run.generation
        fresh.index_in_generation = run.index_in_generation
        fresh.seen, fresh.seen_set = run.seen, run.seen_set
    fold.journal.push((undo.RUN, fold.runs, run_id, run))
    fold.runs[run_id] = fresh
    fold.journal.push((undo.CALL, fold.roots.remove, root))
    fold.roots.add(root, run_id)
    return Effects([watermark(fresh)])


def restart(fold: Fold, event: WorkerGroupRestart, run: RunState | None) -> Effects:
    """contract §3: a restart for a generation the run already reached is a no-op with a warning."""
    data, run_id = event.data, event.subject
    if run is not None and data.generation is not None and data.generation <= run.generation:
        message = (
            f"run {run_id!r}: worker_group_restart for generation {data.generation}, but the run is at generation "
            f"{run.generation} already (a newer worker group's report may have started it); ignored"
        )
        return Effects([warning("restart_not_newer", message)])
    run = run or fold.run_of(run_id)
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
    return Output("worker_group_started", started)


def deletion_completed(fold: Fold, event: DeletionCompleted, run: RunState | None) -> Effects:
    """Evictions settled in storage leave `outstanding` (their paths are free again). A
    completion names the eviction it settles, so an old one never settles a newer eviction of
    the same path; a refused deletion is final and says so in a `warning`."""
    if run is None:
        return NOTHING
    data, outputs = event.data, []
    deleted = [e.checkpoint_path for e in data.deleted if _settle(fold, run, e.checkpoint_path, e.eviction)]
    if deleted:
        outputs.append(Output("checkpoints_deleted", {"checkpoint_paths": deleted}))
    for entry in data.refused:
        if _settle(fold, run, entry.checkpoint_path, entry.eviction):
            message = (
                f"run {run.run_id!r}: evicted checkpoint {entry.checkpoint_path!r} was not deleted: {entry.reason}; "
                "it stays in storage — remove it by hand once you know why"
            )
            outputs.append(warning("deletion_refused", message, entry.checkpoint_path))
    return Effects(outputs) if outputs else NOTHING


def _settle(fold: Fold, run: RunState, path: str, eviction: int | None) -> bool:
    """Drop one outstanding eviction when the completion names it; False when it does not
    (already settled, a retried completion, or an older eviction of the same path)."""
    try:
        key = path if run.is_own_key(path) else normalize(path)  # the processor writes the canonical spelling
    except UnsafePath:
        return False
    evicted = run.outstanding.get(key)
    if evicted is None or (eviction is not None and evicted.eviction != eviction):
        return False
    fold.journal.push((undo.OLD, run.outstanding, key, evicted))
    del run.outstanding[key]
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
        key = path if run.is_own_key(path) else normalize(path)
    except UnsafePath as exc:
        return f"unsafe path: {exc}"
    if key in run.by_key:
        return "it is live again (reported after its eviction)"
    if key not in run.outstanding:
        return "the run no longer owes this deletion (already settled)"
    if key in run.nesting.below:
        below = next((k for k in run.live_keys() if k.startswith(key + "/")), key + "/…")
        return f"the live checkpoint {below} lies inside it"
    at = key.find("/", run.nesting.start)
    while at > run.nesting.start:
        if run.is_live(key[:at]):
            return f"it lies inside the live checkpoint {key[:at]}"
        at = key.find("/", at + 1)
    return None
