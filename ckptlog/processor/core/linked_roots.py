"""Runs refused because their root is reached through a symlink below `--storage-root` (contract
§9 *Roots behind a symlink*).

Whether a directory is a link is a fact of the storage, not of the log. The processor looks when
it registers a root and, finding a link, writes a `root_refused` fact to the run's own input
partition (ckptlog/processor/service/linked.py); the fold acts on that fact, never on the storage,
so a replay refuses the same run at the same offset whether or not the link is still there.

At the fact the run is refused for good: what it still owes is settled as refused (the deleter
never deletes through a link, so nothing would ever be deleted), its state leaves the fold, and
only `Fold.symlinked[run_id] = root` remains, its root still registered under its id so that no
later run of the partition claims a root equal to, above or below it. Every later event of the
run is refused (`root_behind_symlink`), but the no-ops: a settlement, the fact again, a forget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptlog.events.decoded import DecodedEvent, DeletionCompleted, RootRefused, RunForgotten
from ckptlog.events.paths import UnsafePath, normalize
from ckptlog.processor.core import journal as undo
from ckptlog.processor.core.outputs import NOTHING, Effects, deletion_refused, rejected, warning
from ckptlog.processor.core.rejections import root_behind_symlink
from ckptlog.processor.core.state import RunState

if TYPE_CHECKING:
    from ckptlog.processor.core.fold import Fold

CODE = "root_behind_symlink"  # the warning the fact makes, and the rejection of the run's later events


def root_refused(fold: Fold, event: RootRefused, run: RunState | None) -> Effects:
    """The processor saw the run's root behind a link: refuse the run for good (module docstring).
    A fact about another root than the run's (a stale one), or a run that is over, changes nothing."""
    if run is None or run.finished is not None or run.storage_root is None:
        return NOTHING
    try:
        root = normalize(event.data.storage_path)
    except UnsafePath:
        return NOTHING
    if root != run.root:
        return NOTHING
    run_id, runs, push = run.run_id, fold.runs, fold.journal.push
    push((undo.CALL, undo.put_at, (runs, list(runs).index(run_id), run_id, run)))  # back in its place
    del runs[run_id]
    push((undo.NEW, fold.symlinked, run_id))
    fold.symlinked[run_id] = root  # its root stays registered (fold.roots), under its id
    fold.leaving[run_id] = run  # for the service: the run's VIEW is tombstoned (its pages, from its state)
    why = "its run's root is reached through a symlink below --storage-root, and no deletion goes through a link"
    outputs = [deletion_refused(run_id, evicted.path, why) for evicted in run.outstanding.values()]
    message = (
        f"run {run_id!r} is refused: its storage root {root!r} is reached through a symlink below --storage-root "
        f"({event.data.reason}); none of its checkpoints is ever deleted: its {len(run.checkpoints)} kept and "
        f"{len(run.outstanding)} evicted checkpoint(s) stay in storage. Its later events are refused ({CODE}); "
        "start it again under a new run id with a storage_path that has no symlink on the way"
    )
    outputs.append(warning(CODE, message))
    return Effects(outputs)


def after_symlinked(run_id: str, root: str, event: DecodedEvent) -> Effects:
    """An event of a run refused for its root: a settlement, the fact again or a forget change
    nothing; anything else is refused, saying why."""
    if isinstance(event, DeletionCompleted | RootRefused | RunForgotten):
        return NOTHING
    return rejected(root_behind_symlink(run_id, root))
