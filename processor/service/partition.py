"""One assigned input partition: its commit cycle, its after-restore work, its deletions.

Exactly one `PartitionTask` writes a partition's outputs, in offset order; the lock makes
batches, idle flushes and the final close (revocation/shutdown) take turns. What a batch goes
through (fold, outputs, commit, deletions, snapshot) is `CommitCycle` (commit.py). A failed
commit marks the task `broken`: its in-memory fold ran ahead of what is durable, so the
processor discards it and restores the partition again (snapshot + replay).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any

from processor.core.fold import Fold
from processor.core.outputs import Deletion
from processor.errors import CkptlogError
from processor.kafka.records import InputRecord, OutRecord, PartitionId
from processor.service.batch import BatchFolder
from processor.service.checks import find_missing
from processor.service.commit import CommitCycle, DeletionSink, TaskStats, run_of
from processor.service.publish import Publisher
from processor.service.restore import Restored
from processor.service.snapshotting import SnapshotScheduler

log = logging.getLogger(__name__)

__all__ = ["DeletionSink", "GapCheck", "PartitionTask", "TaskStats", "run_of"]

IDLE_FLUSH_S = 0.2
"""Extra outputs (checkpoints_missing) ride along with the next batch; without one for this
long, they get their own commit."""

RESUBMIT_CHUNK = 500
"""Outstanding deletions resubmitted per loop iteration after a restore."""

COMPLETED_PER_EVENT = 200
"""Paths per deletion_completed event: one event per run per Deleter job (≤ 100 paths) in
practice; the cap keeps an event far below the payload limit for long paths too."""

_path_of = itemgetter(1)

GapCheck = Callable[[PartitionId, int, int], Awaitable[None]]
"""(pid, expected offset, first offset received): raises when the log lost the records between."""


class PartitionTask:
    def __init__(
        self,
        pid: PartitionId,
        restored: Restored,
        publisher: Publisher,
        folder: BatchFolder,
        snapshots: SnapshotScheduler,
        deleter: DeletionSink,
        storage_options: Mapping[str, Mapping[str, Any]] | None = None,
        gap_check: GapCheck | None = None,
    ) -> None:
        self.pid, self.deleter, self._options, self._gap_check = pid, deleter, storage_options, gap_check
        self.cycle = CommitCycle(pid, restored, publisher, folder, snapshots, deleter, self.catch_up)
        self.fold: Fold = restored.fold
        self.folder, self.publisher, self.snapshots = folder, publisher, snapshots
        self.lock = asyncio.Lock()
        self._check: asyncio.Task[None] | None = None

    # -- the cycle's state, as the processor, the tests and the benchmarks read it ----------------

    @property
    def usable(self) -> bool:
        return self.cycle.usable

    @property
    def broken(self) -> CkptlogError | None:
        return self.cycle.broken

    @property
    def closed(self) -> bool:
        return self.cycle.closed

    @property
    def stats(self) -> TaskStats:
        return self.cycle.stats

    @property
    def next_offset(self) -> int:
        """Everything below is durable."""
        return self.cycle.next_offset

    @property
    def folded_offset(self) -> int:
        return self.cycle.folded_offset

    @property
    def caught_up(self) -> bool:
        return self.cycle.caught_up

    @property
    def publish_from(self) -> int:
        """The group's committed offset at restore: outputs are published from here on."""
        return self.cycle.publish_from

    @property
    def extra(self) -> list[OutRecord]:
        return self.cycle.extra

    # -- batches ----------------------------------------------------------------------------------

    async def process(self, records: Sequence[InputRecord]) -> None:
        """Check the batch continues the partition, then run it through the commit cycle (which
        returns once it is folded; its commit runs in the background)."""
        async with self.lock:
            if not self.usable:
                return
            expected = self.cycle.folded_offset
            if records and records[0].offset < expected:  # already folded (defensive)
                records = [r for r in records if r.offset >= expected]
            if not records:
                return
            log.debug(
                "event=batch partition=%s first=%d last=%d count=%d expected=%d",
                self.pid,
                records[0].offset,
                records[-1].offset,
                len(records),
                expected,
            )
            if records[0].offset > expected and self._gap_check is not None:
                try:  # control records, aborted transactions -- or records lost to retention?
                    await self._gap_check(self.pid, expected, records[0].offset)
                except CkptlogError as exc:
                    self.cycle.broken = exc
                    return
            await self.cycle.submit(records)

    async def wait_committed(self) -> bool:
        """Wait until the folded batches are committed; False when a commit failed."""
        async with self.lock:
            return await self.cycle.settle()

    async def tick(self, position: Callable[[PartitionId], Awaitable[int]]) -> None:
        """Between polls: collect a finished commit, notice catch-up past control records, flush extra
        outputs once no batch has carried them for a while, time-based snapshots. Never waits for an
        in-flight commit (that would stall the poll loop)."""
        if self.lock.locked() or self.cycle.in_flight:
            return
        async with self.lock:
            if not await self.cycle.settle() or not self.usable:
                return
            if not self.caught_up and await position(self.pid) >= self.publish_from:
                self.catch_up()
            await self.cycle.flush_extra(IDLE_FLUSH_S)
            await self.cycle.snapshot_if_due()

    # -- after a restore --------------------------------------------------------------------------

    def catch_up(self) -> None:
        """State now equals everything durable: resubmit outstanding deletions and check kept
        checkpoints, both in the background so a large backlog never delays processing."""
        self.cycle.caught_up = True
        outstanding = [d for d in self.fold.owed() if d.root]
        for run in self.fold.runs.values():
            if run.storage_root is None and run.outstanding:
                log.error(
                    "event=deletion_skipped partition=%s run=%s paths=%d reason=no_storage_root",
                    self.pid,
                    run.run_id,
                    len(run.outstanding),
                )
        kept = {
            run_id: [r.path for r in run.checkpoints] for run_id, run in self.fold.runs.items() if len(run.checkpoints)
        }
        log.info(
            "event=caught_up partition=%s offset=%d runs=%d outstanding_deletions=%d",
            self.pid,
            self.publish_from,
            len(self.fold.runs),
            len(outstanding),
        )
        self._check = asyncio.get_running_loop().create_task(self._after_restore(outstanding, kept))

    async def _after_restore(self, outstanding: list[Deletion], kept: dict[str, list[str]]) -> None:
        for start in range(0, len(outstanding), RESUBMIT_CHUNK):
            if start:
                await asyncio.sleep(0)  # let the partition make progress between chunks
            if not self.usable:
                return
            self.deleter.submit_many(outstanding[start : start + RESUBMIT_CHUNK])
        await self._check_kept(kept, self.publish_from)

    async def _check_kept(self, kept: dict[str, list[str]], restored_at: int) -> None:
        missing = await find_missing(kept, self._options)
        for run_id, paths in sorted(missing.items()):
            run = self.fold.runs.get(run_id)
            still = [p for p in paths if run is not None and any(r.path == p for r in run.checkpoints)]
            if not still or not self.usable:
                continue
            log.error(
                "event=checkpoints_missing partition=%s run=%s missing=%s; flagged on the checkpoints topic",
                self.pid,
                run_id,
                still,
            )
            self.extra.append(self.folder.factory.checkpoints_missing(run_id, still, restored_at))

    def deletions_done(self, done: Iterable[tuple[str, str]]) -> list[OutRecord]:
        """The completion events to write back for confirmed (run id, path) deletions of this partition's
        runs; none once the task is closed (the next owner resubmits what is still outstanding)."""
        if not self.usable:
            return []
        runs, completed = self.fold.runs, self.folder.factory.deletion_completed
        by_run: dict[str, list[str]] = {}
        for run_id, keys in groupby(done, run_of):  # keys come grouped by run: move them in slices
            if run_id in runs:
                by_run.setdefault(run_id, []).extend(map(_path_of, keys))
        return [
            completed(run_id, paths[at : at + COMPLETED_PER_EVENT])
            for run_id, paths in by_run.items()
            for at in range(0, len(paths), COMPLETED_PER_EVENT)
        ]

    def owns(self, run_id: str) -> bool:
        return run_id in self.fold.runs

    async def close(self, graceful: bool) -> None:
        """Graceful: flush extra outputs, final snapshot. Either way: stop the publisher."""
        if self.closed:
            return
        async with self.lock:
            if self._check is not None:
                self._check.cancel()
            await self.cycle.close(graceful)
            log.info(
                "event=partition_closed partition=%s graceful=%s next_offset=%d consumed=%d published=%d",
                self.pid,
                graceful,
                self.next_offset,
                self.stats.consumed,
                self.stats.published,
            )
