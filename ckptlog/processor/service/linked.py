"""Roots behind a symlink (contract §9): what the processor saw enters the log with the batch.

A batch that registered run roots (a run_started, an implicit run's first event) is looked at
before it commits: each local root below a local `--storage-root` that a link leads to
(ckptlog/processor/storage/links.py) gets, among the batch's own records and so in its
transaction (under at_least_once: acknowledged before its offsets are committed),

- a `ckptlog.root_refused.v1` fact on the run's input partition, which the fold acts on when it
  reads it (ckptlog/processor/core/linked_roots.py): the run is refused for good. A replay folds
  the fact; it never looks at the storage, so it rebuilds the same state whatever the storage
  holds by then;
- the dead letter of the run_started that registered the root, if one of the batch did
  (`root_behind_symlink`, stage `storage`): the processor's answer to its sender, committed with
  the offset past it, so a confirming sender (`--confirm`, `confirm=True`) is told at once.

Only records folded at or above the group's committed offset are looked at (`Batch.claims` holds
only theirs): what an earlier owner committed was looked at then, and its facts are in the log.
"""

from __future__ import annotations

import logging

from ckptlog.processor.core.rejections import root_behind_symlink
from ckptlog.processor.service.batch import Batch
from ckptlog.processor.service.records import RecordFactory
from ckptlog.processor.storage.links import look

log = logging.getLogger(__name__)

STAGE = "storage"
"""The dead letter's stage (contract §8): the processor's look at the storage refused it, not the fold."""


async def refuse_linked(batch: Batch, factory: RecordFactory, outer: str | None) -> int:
    """Look at the roots `batch` registered; add the fact and the dead letter of each one a link
    leads to to the batch's records. How many roots were refused."""
    found = await look(batch.claims, outer)
    for (root, run_id), seen in found.items():
        batch.records.append(factory.root_refused(run_id, root, seen))
        record = batch.started.get(run_id)
        if record is not None:
            rejection = root_behind_symlink(run_id, root, seen)
            reason = str(rejection.reason)
            batch.records.append(factory.dead_letter(record, rejection, STAGE))
            batch.dead[reason] = batch.dead.get(reason, 0) + 1
            batch.reasons[reason, STAGE] = batch.reasons.get((reason, STAGE), 0) + 1
        log.error(
            "event=root_behind_symlink run=%r root=%r at=%s: %s; the run is refused (its events from now on are "
            "rejected, none of its checkpoints is deleted) — give it a storage_path with no symlink on the way",
            run_id,
            root,
            factory.pid,
            seen,
        )
    return len(found)
