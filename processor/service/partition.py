"""One assigned input partition: its fold, its publisher, its snapshots, its deletions.

Exactly one `PartitionTask` writes a partition's outputs, in offset order; the lock makes
batches, idle flushes and the final close (revocation/shutdown) take turns. A failed commit
marks the task `broken`: its in-memory fold ran ahead of what is durable, so the processor
discards it and restores the partition again (snapshot + replay).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from typing import Any, Protocol

from processor.core.outputs import Deletion
from processor.errors import CkptlogError
from processor.kafka.records import InputRecord, OutRecord, PartitionId
from processor.service.batch import Batch, BatchFolder
from processor.service.checks import find_missing
from processor.service.errors import ServiceError
from processor.service.publish import Publisher
from processor.service.restore import Restored
from processor.service.snapshotting import SnapshotScheduler

log = logging.getLogger(__name__)


IDLE_FLUSH_S = 0.2
"""Extra outputs (checkpoints_missing) ride along with the next batch; without one for this
long, they get their own transaction."""


RESUBMIT_CHUNK = 500
"""Outstanding deletions resubmitted per loop iteration after a restore."""

COMPLETED_PER_EVENT = 200
"""Paths per deletion_completed event: one event per run per Deleter job (≤ 100 paths) in
practice; the cap keeps an event far below the payload limit for long paths too."""


run_of = itemgetter(0)  # Deletion.run_id, or a (run id, path) key's run id: what evictions and completions group by
_path_of = itemgetter(1)


GapCheck = Callable[[PartitionId, int, int], Awaitable[None]]
"""(pid, expected offset, first offset received): raises when the log lost the records between."""


class DeletionSink(Protocol):
    def submit_many(self, requests: Iterable[Deletion]) -> int: ...


@dataclass(slots=True)
class TaskStats:
    consumed: int = 0
    applied: int = 0
    rejected: int = 0
    duplicates: int = 0
    published: int = 0
    batches: int = 0
    fold_s: float = 0.0  # time spent decoding, folding and building records
    commit_s: float = 0.0  # time spent publishing and committing


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
        self.pid, self.publisher, self.folder = pid, publisher, folder
        self._gap_check = gap_check
        self.fold = restored.fold
        self.snapshots, self.deleter, self._options = snapshots, deleter, storage_options
        self.next_offset = restored.start  # everything below is durable (committed, or below publish_from)
        self.folded_offset = restored.start  # everything below is folded
        self.publish_from = restored.publish_from  # the group's committed offset at restore
        self.caught_up = False
        self.extra: list[OutRecord] = []
        self.lock = asyncio.Lock()
        self.closed = False
        self.broken: CkptlogError | None = None
        self.stats = TaskStats()
        self._check: asyncio.Task[None] | None = None
        self._pending: asyncio.Task[None] | None = None
        self._last_batch = 0.0

    @property
    def usable(self) -> bool:
        return not self.closed and self.broken is None

    async def process(self, records: Sequence[InputRecord]) -> None:
        """Fold a batch, then hand it to a background commit: the next batch folds while this one commits.

        Transactions stay strictly sequential (the previous commit is awaited before the next
        begins); snapshots are taken only when no folded batch is waiting to commit."""
        async with self.lock:
            if not self.usable:
                return
            if records and records[0].offset < self.folded_offset:  # already folded (defensive)
                records = [r for r in records if r.offset >= self.folded_offset]
            if not records:
                return
            log.debug(
                "event=batch partition=%s first=%d last=%d count=%d expected=%d",
                self.pid,
                records[0].offset,
                records[-1].offset,
                len(records),
                self.folded_offset,
            )
            if records[0].offset > self.folded_offset and self._gap_check is not None:
                try:  # control records, aborted transactions -- or records lost to retention?
                    await self._gap_check(self.pid, self.folded_offset, records[0].offset)
                except CkptlogError as exc:
                    self.broken = exc
                    return
            if self.snapshots.due(self.next_offset):
                await self._settle()
                self._maybe_snapshot()
            started = time.perf_counter()
            self._last_batch = time.monotonic()
            batch = self._fold(records)
            self.folded_offset = next_offset = records[-1].offset + 1
            out = batch.records
            if self.extra:
                out.extend(self.extra)
                self.extra = []
            self.stats.fold_s += time.perf_counter() - started
            if not await self._settle():
                return
            offsets = {self.pid: next_offset} if batch.live else {}
            self._pending = asyncio.get_running_loop().create_task(self._commit(out, offsets, batch, next_offset))

    def _fold(self, records: Sequence[InputRecord]) -> Batch:
        if self.caught_up or records[-1].offset < self.publish_from:
            return self.folder.fold_records(records, self.publish_from)
        split = next(i for i, r in enumerate(records) if r.offset >= self.publish_from)
        batch = self.folder.fold_records(records[:split], self.publish_from)
        self.catch_up()  # before the first live record: the state equals the durable one
        batch.merge(self.folder.fold_records(records[split:], self.publish_from))
        return batch

    async def wait_committed(self) -> bool:
        """Wait until the folded batches are committed; False when a commit failed."""
        async with self.lock:
            return await self._settle()

    async def _settle(self) -> bool:
        """Wait for the in-flight commit; False when it failed (the task is then broken)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            await asyncio.shield(pending)
        return self.broken is None

    async def _commit(
        self, records: list[OutRecord], offsets: dict[PartitionId, int], batch: Batch | None, next_offset: int
    ) -> None:
        started = time.perf_counter()
        try:
            if records or offsets:
                await self.publisher.commit(records, offsets)
        except asyncio.CancelledError:
            self.broken = ServiceError(
                f"{self.pid}: cancelled in the middle of a commit; the partition must be "
                "restored before it is used again"
            )
            raise
        except CkptlogError as exc:
            self.broken = exc
            log.error(
                "event=commit_failed partition=%s next_offset=%d records=%d error=%s",
                self.pid,
                next_offset,
                len(records),
                exc,
            )
            return
        stats = self.stats
        stats.commit_s += time.perf_counter() - started
        log.debug(
            "event=committed partition=%s next_offset=%d records=%d seconds=%.4f at=%.4f",
            self.pid,
            next_offset,
            len(records),
            time.perf_counter() - started,
            time.perf_counter(),
        )
        stats.published += len(records)
        self.next_offset = next_offset
        if batch is None:
            return
        stats.consumed += batch.consumed
        stats.applied += batch.applied
        stats.rejected += batch.rejected
        stats.duplicates += batch.duplicates
        stats.batches += 1
        if batch.deletions:  # the evictions are durable now; grouped by run, so that a Deleter job
            # (≤ 100 paths) mostly serves one run and confirms them in one completion event
            self.deleter.submit_many(sorted(batch.deletions, key=run_of))
        self.snapshots.count(batch.consumed)

    def _maybe_snapshot(self) -> None:
        """Snapshot when due and the fold holds exactly the durable state."""
        if self.usable and self.folded_offset == self.next_offset and self.snapshots.due(self.next_offset):
            self.snapshots.start(self.fold, self.next_offset)

    async def tick(self, position: Callable[[PartitionId], Awaitable[int]]) -> None:
        """Between polls: collect a finished commit, notice catch-up past control records, time-based
        snapshots, and flush deletion completions once no batch has carried them for a while.
        Never waits for an in-flight commit (that would stall the poll loop)."""
        if self.lock.locked() or (self._pending is not None and not self._pending.done()):
            return
        async with self.lock:
            if not await self._settle() or not self.usable:
                return
            if not self.caught_up and await position(self.pid) >= self.publish_from:
                self.catch_up()
            if self.extra and time.monotonic() - self._last_batch > IDLE_FLUSH_S:
                extra, self.extra = self.extra, []
                await self._commit(extra, {}, None, self.next_offset)
            self._maybe_snapshot()

    def catch_up(self) -> None:
        """State now equals everything durable: resubmit outstanding deletions and check kept
        checkpoints, both in the background so a large backlog never delays processing."""
        self.caught_up = True
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
        """Graceful: flush completions, final snapshot. Either way: stop the publisher."""
        if self.closed:
            return
        async with self.lock:
            await self._settle()
            self.closed = True
            if self._check is not None:
                self._check.cancel()
            if graceful and self.broken is None:
                if self.extra:
                    extra, self.extra = self.extra, []
                    await self._commit(extra, {}, None, self.next_offset)
                if self.broken is None:
                    await self.snapshots.write_now(self.fold, self.next_offset)
            else:
                await self.snapshots.wait()
            await self.publisher.close()
            log.info(
                "event=partition_closed partition=%s graceful=%s next_offset=%d consumed=%d published=%d",
                self.pid,
                graceful,
                self.next_offset,
                self.stats.consumed,
                self.stats.published,
            )
