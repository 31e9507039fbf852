"""A finished run goes on (contract §3 "Reopened runs"): run_reopened.

A finished run keeps its state while its finished record is kept: in `Fold.runs` while it owes
deletions, then in `Fold.retired`, encoded as its snapshot entry
(ckptlog/processor/core/finishing.py). A reopen brings that state back as it finished — kept
checkpoints, latest, pending, counters, generation, retention rules' state, its root still
registered — with `finished` cleared and `reopened` counted: the run's epoch, which the clients
name their finish and reopen ids by. A run retired with no state (it was forgotten, or retired
under a build that kept none) and a run the fold does not know (never seen, or its record expired)
are refused: a new run of a reused id could take the old run's late events for its own, which is
what the retired claim in storage guards against (contract §3 *Expiry*).

The service removes the reopened run's own retired claim from its root after the reopen commits
(ckptlog/processor/storage/claim_writer.py); `Fold.reopening` names the runs the last event brought
back from `retired`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptlog.events.decoded import RunReopened
from ckptlog.events.rejections import Reason, Rejection
from ckptlog.processor.core import journal as undo
from ckptlog.processor.core.outputs import Effects, rejected, watermark
from ckptlog.processor.core.snapshot import reopened_state
from ckptlog.processor.core.state import RunState

if TYPE_CHECKING:
    from ckptlog.processor.core.fold import Fold


def run_reopened(fold: Fold, event: RunReopened, run: RunState | None) -> Effects:
    """Reopen a finished run whose state the fold holds; refuse anything else (contract §3, §8)."""
    run_id = event.subject
    if run is not None:  # in the hot state: unfinished, or finished and owing deletions
        if run.finished is None:
            return rejected(not_finished(run_id))
        return _reopen(run)  # the journal saved `finished` and `reopened` (journal.SCALARS)
    kept = fold.retired.get(run_id)
    if kept is None:
        return rejected(not_reopenable(run_id) if run_id in fold.finished else unknown_run(run_id))
    state = reopened_state(run_id, kept)  # a new object: nothing to undo in it
    _unretire(fold, run_id, state, kept)
    state.finished = None
    state.reopened += 1
    return Effects([watermark(state)])


def _reopen(run: RunState) -> Effects:
    run.finished = None
    run.reopened += 1
    return Effects([watermark(run)])


def _unretire(fold: Fold, run_id: str, state: RunState, kept: bytes) -> None:
    """The retired state back in the hot state: its record and encoded state leave their tables
    (undone in their places), its root stays registered to it."""
    push = fold.journal.push
    tables: tuple[tuple[dict[str, Any], Any], ...] = ((fold.finished, fold.finished[run_id]), (fold.retired, kept))
    for table, value in tables:
        at = list(table).index(run_id)  # O(records), once per reopen
        push((undo.CALL, undo.put_at, (table, at, run_id, value)))
        del table[run_id]
    push((undo.RUN, fold.runs, run_id, None))
    fold.runs[run_id] = state
    fold.reopening[run_id] = state


def not_finished(run_id: str) -> Rejection:
    return Rejection(
        Reason.RUN_NOT_FINISHED,
        f"run {run_id!r} has not finished, so there is nothing to reopen (a reopen of it was applied already, or "
        "it never finished): its events are taken as they come — send its reports",
    )


def unknown_run(run_id: str) -> Rejection:
    return Rejection(
        Reason.UNKNOWN_RUN,
        f"run {run_id!r} cannot be reopened: this partition knows no finished run of that id — it never ran here, "
        "or it finished so long ago that its record expired (--finished-runs-kept); its checkpoints stay in "
        "storage, barred to every later run of the id (contract §3 *Expiry*): start a new run with a new run id "
        "and a directory of its own",
    )


def not_reopenable(run_id: str) -> Rejection:
    return Rejection(
        Reason.NOT_REOPENABLE,
        f"run {run_id!r} cannot be reopened: it left the processor's state without the state a reopen brings "
        "back — it was forgotten (`ckptlog forget`), or it finished under a ckptlog that kept no state of "
        "finished runs (a snapshot of schema 5 or older); its final VIEW and its checkpoints stay as they are: "
        "start a new run with a new run id and a directory of its own",
    )
