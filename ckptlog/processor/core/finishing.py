"""Runs end (contract §3 "Finished runs"): run_finished, its last retention, and the run leaving
the hot state once every deletion it owes is settled.

A finished run stays a full `RunState` while it owes deletions (so a restore re-drives them and the
deleter's check still finds them, contract §9); once `outstanding` is empty it is retired: its
state leaves `Fold.runs`, `Fold.finished[run_id] = root` records it, whose root stays registered so
no later run can claim a root equal to, above or below it, and `Fold.retired[run_id]` keeps its
state with its structured ids' ranges and without its foreign ids, encoded (snapshot.retired_state),
for a reopen (ckptlog/processor/core/reopening.py; a forgotten run keeps none). Retirement happens in the event
that settles the last deletion (or in run_finished itself when nothing is owed), so it is a
function of the log alone: a replay retires the same runs at the same offsets.

The finished records are bounded (`FoldSettings.finished_runs_kept`): each retirement past the
bound expires the oldest record, its state with it, and the expired run is unknown to the fold
again (contract §3, *Expiry*); its root claim in storage (`{root}/.ckptlog-run/`, §9) still guards
its checkpoints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptlog.events.decoded import DecodedEvent, DeletionCompleted, RootRefused, RunFinished, RunForgotten
from ckptlog.events.rejections import Reason, Rejection
from ckptlog.processor.core import journal as undo
from ckptlog.processor.core.outputs import NOTHING, Deletion, Effects, Output, evicted, rejected, warning, watermark
from ckptlog.processor.core.retention import apply_retention
from ckptlog.processor.core.snapshot import retired_state
from ckptlog.processor.core.state import RunState

if TYPE_CHECKING:
    from ckptlog.processor.core.fold import Fold
    from ckptlog.processor.core.lifecycle import Roots


def finished_rejection(run_id: str, event_type: str) -> Rejection:
    return Rejection(
        Reason.RUN_FINISHED,
        f"run {run_id!r} has finished: {event_type} after its run_finished is refused; its final VIEW stays on "
        "the state topic (`ckptlog inspect`); a retry of an event sent before the finish may have been applied "
        "already — check that VIEW; a new run needs a new run id",
    )


def after_retired(run_id: str, event: DecodedEvent) -> Effects:
    """An event for a run that finished and left the hot state: a repeated finish, a late
    settlement and a late root fact (contract §9) change nothing; anything else is refused (`run_finished`).
    (A forget and a reopen go to their handlers: they change the state the run kept.)"""
    if isinstance(event, RunFinished | DeletionCompleted | RunForgotten | RootRefused):
        return NOTHING
    return rejected(finished_rejection(run_id, event.type))


def run_finished(fold: Fold, event: RunFinished, run: RunState | None) -> Effects:
    """Mark the run finished, apply its last retention (`keep`), retire it when nothing is owed."""
    fold.finishes += 1
    if run is None:  # nothing was ever folded for it: nothing to finish, nothing to remember
        message = f"run {event.subject!r}: run_finished for a run this partition has no state for; ignored"
        return Effects([warning("finish_unknown_run", message)])
    if run.finished is not None:
        return NOTHING  # a repeated finish: the first one decided what the run keeps
    run.finished = event.data.keep  # the journal saved the old value (journal.SCALARS)
    outputs, deletions = _keep_best(fold, run) if event.data.keep == "best" else ([], [])
    outputs.append(watermark(run))
    retire_if_settled(fold, run)
    return Effects(outputs, deletions)


def _keep_best(fold: Fold, run: RunState) -> tuple[list[Output], list[Deletion]]:
    """`keep: "best"`: evict every kept checkpoint but the best (the last in sort order), the latest,
    the pending and the preserved ones (§3, §9). A preserved best is the best: it ranks 1st among
    what the rule counts, and every checkpoint that is not preserved ranks below it."""
    best = run.checkpoints.last()
    preserved_best = best is not None and best.preserved is not None
    excess = len(run.checkpoints) - run.preserved_count - (0 if preserved_best else 1)
    if excess <= 0:
        return [], []
    root, outputs, deletions = run.storage_root or "", [], []
    retained = apply_retention(run, excess, fold.journal.push)
    for record, eviction, rank in retained.evicted:
        if preserved_best:  # apply_retention ranks the non-preserved ones: the preserved best is above them
            outputs.append(evicted(run, record, rank + 1, best, "best", 1))
        else:
            outputs.append(evicted(run, record, rank, retained.worst_kept, "best", 1))
        deletions.append(Deletion(run.run_id, record.path, root, eviction))
    return outputs, deletions


def retire_if_settled(fold: Fold, run: RunState, *, reopenable: bool = True) -> None:
    """A finished run that owes no deletion leaves the hot state, its root still registered; its
    state, `reopenable`, stays in `retired` without its foreign ids (contract §3 "Reopened runs")."""
    if run.finished is None or run.outstanding:
        return
    push, run_id, runs = fold.journal.push, run.run_id, fold.runs
    at = 0 if next(iter(runs)) == run_id else list(runs).index(run_id)  # runs mostly end oldest first
    push((undo.CALL, undo.put_at, (runs, at, run_id, run)))  # back in its place: `runs` is in order
    del runs[run_id]
    push((undo.NEW, fold.finished, run_id))
    fold.finished[run_id] = run.root if run.storage_root is not None else ""
    if reopenable:  # its state as the snapshot writes it, without the up to 4096 foreign ids it remembers
        push((undo.NEW, fold.retired, run_id))
        fold.retired[run_id] = retired_state(run)
    fold.leaving[run_id] = run
    expire(fold)


def drop_state(fold: Fold, run_id: str) -> None:
    """A retired run's state leaves `retired` (it expired, or it was forgotten), undone in its place."""
    retired = fold.retired
    state = retired.get(run_id)
    if state is None:
        return
    at = 0 if next(iter(retired)) == run_id else list(retired).index(run_id)
    fold.journal.push((undo.CALL, undo.put_at, (retired, at, run_id, state)))
    del retired[run_id]


def expire(fold: Fold) -> None:
    """Keep the records of the newest `finished_runs_kept` retired runs: the oldest leave first,
    their roots unregistered (contract §3 "Finished runs", *Expiry*). The table is in retirement
    order (a dict keeps insertion order, and so does the snapshot's JSON), so which record goes is
    a function of the log alone."""
    finished, kept, push = fold.finished, fold.settings.finished_runs_kept, fold.journal.push
    while len(finished) > kept:
        run_id = next(iter(finished))
        root = finished.pop(run_id)
        if fold.changed is not None:  # another run's record: the next delta must drop it too
            fold.changed[run_id] = None
        push((undo.CALL, undo.put_at, (finished, 0, run_id, root)))  # back at the head
        drop_state(fold, run_id)  # the oldest retired state: `retired` is in the order of `finished`
        if root and fold.roots.owners.get(root) == run_id:
            fold.roots.remove(root)
            push((undo.CALL, _register, (fold.roots, root, run_id)))


def _register(entry: tuple[Roots, str, str]) -> None:
    roots, root, run_id = entry
    roots.add(root, run_id)


def run_forgotten(fold: Fold, event: RunForgotten, run: RunState | None) -> Effects:
    """An operator drops a run now (contract §3 "Forgotten runs"): it is finished as it stands
    (nothing evicted, nothing deleted) and retired at once; the service tombstones its VIEW.
    Refused while the run owes deletions: its state is what the deleter checks them against. A
    forgotten run keeps no state to reopen; forgetting a retired run drops the state it kept."""
    if run is None and event.subject in fold.finished:
        drop_state(fold, event.subject)  # retired already: its VIEW's tombstone is left to write
        return NOTHING
    fold.finishes += 1
    if run is None:
        return NOTHING  # never seen: only the VIEW's tombstone is left to write
    if run.outstanding:
        return rejected(
            Rejection(
                Reason.DELETIONS_OWED,
                f"run {run.run_id!r} owes {len(run.outstanding)} deletion(s) not settled yet; its state stays "
                "until they are (the deleter settles them, deleted or refused) — send the forget again then",
            )
        )
    if run.finished is None:
        run.finished = "kept"  # the journal saved the old value (journal.SCALARS)
    retire_if_settled(fold, run, reopenable=False)
    return NOTHING
