"""One assigned input partition's task: its pipeline, its after-restore work, its deletions.

Exactly one `PartitionTask` writes a partition's outputs, in offset order; the lock makes
batches, idle flushes and the final close (revocation/shutdown) take turns. What a batch goes
through (decode → apply → emit → commit → after-commit) is the task's `Pipeline` (pipeline.py). The
partition's phase (replaying, live, broken: ckptlog/processor/service/lifecycle.py) is its `life`: a
failed commit breaks it, because the in-memory fold ran ahead of what is durable, so the
processor discards the task and restores the partition again (snapshot + replay).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any, Protocol

from ckptlog.errors import CkptlogError, OffsetOutOfRange
from ckptlog.events.outputs import CHECKPOINTS_MISSING
from ckptlog.kafka.records import InputRecord, OutRecord, PartitionId
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.lifecycle import deletion_problem, owed
from ckptlog.processor.core.outputs import Deletion
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.service.checks import find_missing
from ckptlog.processor.service.lifecycle import Partition
from ckptlog.processor.service.metrics import NO_METRICS, ServiceMetrics
from ckptlog.processor.service.pipeline import Pipeline, TaskStats, run_of
from ckptlog.processor.service.ports import ClaimSink, DeletionSink
from ckptlog.processor.service.publish import Publisher
from ckptlog.processor.service.records import RecordFactory
from ckptlog.processor.service.restore import Restored
from ckptlog.processor.service.snapshotting import SLICE_S, SnapshotScheduler

log = logging.getLogger(__name__)

__all__ = [
    "ClaimSink",
    "DeletionSink",
    "PartitionTask",
    "PositionControl",
    "TaskParts",
    "TaskStats",
    "new_task",
    "run_of",
]

IDLE_FLUSH_S = 0.2
"""Extra outputs (checkpoints_missing) ride along with the next batch; without one for this
long, they get their own commit."""

RESUBMIT_CHUNK = 500
"""Outstanding deletions resubmitted per loop iteration after a restore."""

COMPLETED_PER_EVENT = 200
"""Paths per deletion_completed event: one event per run per Deleter job (≤ 100 paths) in
practice; the cap keeps an event far below the payload limit for long paths too."""


class PositionControl(Protocol):
    """What a task asks of the input consumer (InputConsumer): where the log starts, and a seek."""

    def seek(self, pid: PartitionId, offset: int) -> None: ...

    async def log_start(self, pid: PartitionId) -> int: ...


@dataclass(frozen=True, slots=True)
class TaskParts:
    """What a partition task works with besides its restored state; ckptlog/processor/service/tasks.py
    builds them (the tests build them by hand)."""

    publisher: Publisher
    factory: RecordFactory  # the partition's records (its envelopes, routing, dead letters)
    snapshots: SnapshotScheduler
    deleter: DeletionSink
    claims: ClaimSink  # the run roots' claims (storage/claim_writer.py): written here, asked by the deleter
    consumer: PositionControl | None = None  # None: batches are trusted to continue the partition
    storage_options: Mapping[str, Mapping[str, Any]] | None = None
    metrics: ServiceMetrics = NO_METRICS
    allow_data_loss: bool = False
    restore_started: float | None = None  # time.monotonic() when the restore began


def new_task(pid: PartitionId, restored: Restored, parts: TaskParts) -> PartitionTask:
    """A restored task with a partition of its own, for tools and tests that run one task without a
    `Processor` (which builds its tasks with ckptlog/processor/service/tasks.py)."""
    task = PartitionTask(Partition(pid, 0), restored, parts)
    task.life.restored(task)
    return task


class PartitionTask:
    """The task of one `Partition` (ckptlog/processor/service/lifecycle.py), from its restore on: its phase
    is the partition's (`life`), its batches go through its `pipeline`."""

    def __init__(self, life: Partition, restored: Restored, parts: TaskParts) -> None:
        self.life, self.pid, self.deleter, self.claims = life, life.pid, parts.deleter, parts.claims
        self._consumer, self._options, self._allow_loss = parts.consumer, parts.storage_options, parts.allow_data_loss
        self._jump = (-1, -1)  # the last jump in offsets re-read (expected, received)
        self._placed = False  # a batch was folded: the consumer's position is this task's own
        self.metrics, self._restore_started = parts.metrics, parts.restore_started
        self.pipeline = Pipeline(
            life,
            restored,
            parts.factory,
            parts.publisher,
            parts.snapshots,
            parts.deleter,
            parts.claims,
            self.catch_up,
            parts.metrics,
        )
        self.fold: Fold = restored.fold
        self.publisher, self.snapshots = parts.publisher, parts.snapshots
        self.lock = asyncio.Lock()
        self._check: asyncio.Task[None] | None = None
        self._redrive_at: int | None = restored.log_end  # None once the owed deletions are re-driven
        self._redriving: asyncio.Task[None] | None = None

    # -- batches ----------------------------------------------------------------------------------

    async def process(self, records: Sequence[InputRecord]) -> None:
        """Check the batch continues the partition, then run it through the pipeline (which returns
        once it is folded; its commit runs in the background)."""
        async with self.lock:
            if not self.pipeline.usable:
                return
            expected = self.pipeline.folded_offset
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
            if records[0].offset > expected and not await self._jumped(expected, records[0].offset):
                return
            self._placed = True
            await self.pipeline.submit(records)

    async def _jumped(self, expected: int, received: int) -> bool:
        """Records start past the fold's offset: may the fold go on from `received`?

        Only over records that are not data: transaction markers and aborted records. A consumer
        position moved by anything else (a stale seek, an assignment reset to the committed offset)
        would leave the records between out of the state for good, and nothing downstream could
        tell. Such a position shows in the task's first batch, so until one is folded a jump is
        dropped and the partition re-read from `expected`; a jump the broker repeats from there is
        genuine. (Later jumps are aiokafka skipping markers at a fetch's end: with input written in
        transactions, nearly every fetch; re-reading them would double the fetches.) Then the log
        start is checked: records deleted by retention are data loss (`_gap`)."""
        if self._consumer is None:
            return True
        if not self._placed and self._jump != (expected, received):
            self._jump = (expected, received)
            log.warning(
                "event=offset_jump at=%s@%d received=%d; dropping the batch and re-reading from %d once",
                self.pid,
                expected,
                received,
                expected,
            )
            self._consumer.seek(self.pid, expected)
            self.metrics.offset_jump()
            return False
        try:
            await self._gap(self._consumer, expected, received)
        except CkptlogError as exc:
            self.life.broke(exc)
            return False
        return True

    async def _gap(self, consumer: PositionControl, expected: int, received: int) -> None:
        """A jump is normal (transaction markers, aborted records) unless retention deleted records
        this task never read: then stop, or with --allow-data-loss log and go on."""
        log_start = await consumer.log_start(self.pid)
        if log_start <= expected:
            return
        message = (
            f"{self.pid}: offsets {expected}..{log_start - 1} were deleted by retention before this processor "
            f"read them (it expected {expected}, the log now starts at {log_start}); their events are not "
            "in the state. Increase the input topic's retention, or restart with --allow-data-loss to "
            "continue without them"
        )
        if not self._allow_loss:
            raise OffsetOutOfRange(message)
        log.error(
            "event=DATA_LOSS partition=%s expected=%d log_start=%d received=%d", self.pid, expected, log_start, received
        )

    async def wait_committed(self) -> bool:
        """Wait until the folded batches are committed; False when a commit failed."""
        async with self.lock:
            return await self.pipeline.settle()

    async def tick(self, position: Callable[[PartitionId], Awaitable[int]]) -> None:
        """Between polls: collect a finished commit, notice catch-up past control records, flush extra
        outputs once no batch has carried them for a while, time-based snapshots. Never waits for an
        in-flight commit (that would stall the poll loop)."""
        if self.lock.locked() or self.pipeline.in_flight:
            return
        async with self.lock:
            if not await self.pipeline.settle() or not self.pipeline.usable:
                return
            reached = await position(self.pid)
            if not self.life.live and reached >= self.pipeline.publish_from:
                self.catch_up()
            self._maybe_redrive(max(reached, self.pipeline.folded_offset))
            await self.pipeline.flush_extra(IDLE_FLUSH_S)
            await self.pipeline.snapshot_if_due()

    # -- after a restore --------------------------------------------------------------------------

    def catch_up(self) -> None:
        """State now equals everything durable: check the kept checkpoints, in the background so a
        large state never delays processing. (The deletions owed wait for `_maybe_redrive`.)"""
        self.life.caught_up()
        kept = {run_id: paths for run_id, run in self.fold.runs.items() if (paths := run.kept_paths())}
        log.info("event=caught_up at=%s@%d runs=%d", self.pid, self.pipeline.publish_from, len(self.fold.runs))
        if self._restore_started is not None:
            self.metrics.caught_up(time.monotonic() - self._restore_started)
        crash_point("restore.caught_up")
        finished, symlinked, source = self.fold.finished, self.fold.symlinked, str(self.pid)
        reopened = {run.run_id: run.root for run in self.fold.runs.values() if run.reopened and run.storage_root}
        live = [  # a run refused for a link to its root gets no claim: no walk goes through the link (§9)
            (root, run_id)
            for root, run_id in self.fold.roots.owners.items()
            if finished.get(run_id) != root and run_id not in symlinked and run_id not in reopened
        ]
        self.claims.claim_many(live, source)  # any an earlier owner did not write
        retired = [(root, run_id) for run_id, root in finished.items() if root]
        self.claims.claim_many(retired, source, retired=True)  # and the finished runs' retired claims
        # a reopened run's live claim, its retired claim removed (a crash may have come between its commit and that)
        self.claims.claim_many([(root, run_id) for run_id, root in reopened.items()], source, reopened=True)
        self._check = asyncio.get_running_loop().create_task(self._check_kept(kept, self.pipeline.publish_from))

    def _maybe_redrive(self, reached: int) -> None:
        """Once the fold has read what the log held at restore, hand the deletions the state still
        owes to the deleter (contract §9). Not sooner: a path evicted before the crash may have been
        settled and reported again since — only the log says so — and the deleter's re-check can
        only see what the fold has read. And only while the fold holds exactly the durable state,
        so that no eviction still waiting for its commit is handed over."""
        pipeline = self.pipeline
        if self._redrive_at is None or reached < self._redrive_at or not self.life.live or not pipeline.usable:
            return
        if pipeline.in_flight or pipeline.folded_offset != pipeline.next_offset:
            return  # only evictions that are durable may be deleted: wait until nothing awaits its commit
        self._redrive_at = None
        owed = [d for d in self.fold.owed() if d.root]
        for run in self.fold.runs.values():
            if run.storage_root is None and (evictions := run.owed_evictions()):
                log.error(
                    "event=deletion_skipped partition=%s run=%s paths=%d reason=no_storage_root",
                    self.pid,
                    run.run_id,
                    len(evictions),
                )
        log.info("event=redrive partition=%s at=%d outstanding_deletions=%d", self.pid, reached, len(owed))
        self._redriving = asyncio.get_running_loop().create_task(self._redrive(owed))

    async def _redrive(self, owed: list[Deletion]) -> None:
        for start in range(0, len(owed), RESUBMIT_CHUNK):
            if start:
                await asyncio.sleep(0)  # let the partition make progress between chunks
            if not self.pipeline.usable:
                return
            self.deleter.submit_many(owed[start : start + RESUBMIT_CHUNK], str(self.pid))
        crash_point("restore.redriven")

    async def _check_kept(self, kept: dict[str, list[str]], restored_at: int) -> None:
        """Flag the kept checkpoints found missing, in slices of at most SLICE_S: flagging 100,000
        runs in one go (an ERROR line and a record each) held the event loop for 10 s, past the
        group's session timeout, so the member was dropped and the partition restored again."""
        missing = await find_missing(kept, self._options)
        deadline = time.perf_counter() + SLICE_S
        for run_id, paths in sorted(missing.items()):
            if time.perf_counter() >= deadline:
                await asyncio.sleep(0)
                deadline = time.perf_counter() + SLICE_S
            if not self.pipeline.usable:
                return
            self._flag_missing(run_id, paths, restored_at)

    def _flag_missing(self, run_id: str, paths: list[str], restored_at: int) -> None:
        """The run's paths its state still keeps, flagged on the checkpoints topic with the next commit."""
        run = self.fold.runs.get(run_id)
        still = [p for p in paths if run is not None and any(r.path == p for r in run.checkpoints)]
        if not still:
            return
        log.error(
            "event=checkpoints_missing partition=%s run=%s missing=%s; flagged on the checkpoints topic",
            self.pid,
            run_id,
            still,
        )
        self.pipeline.extra.append(self.pipeline.factory.checkpoints_missing(run_id, still, restored_at))
        self.metrics.extra_outputs(CHECKPOINTS_MISSING.name, 1)

    def deletions_settled(
        self, done: Iterable[tuple[str, str]], refused: Iterable[tuple[tuple[str, str], str]] = ()
    ) -> list[OutRecord]:
        """The completion events to write back for settled deletions of this partition's runs:
        (run id, path) keys confirmed gone (`done`) or refused by the deleter (`refused`, with why).
        Each names the eviction the run's state owes for the path (contract §9: a confirmed deletion is
        a fact about one eviction). None once the task is closed: the next owner re-drives what is
        still outstanding."""
        if not self.pipeline.usable:
            return []
        by_run: dict[str, tuple[list[tuple[str, int]], list[tuple[str, int, str]]]] = {}
        runs = self.fold.runs
        for run_id, keys in groupby(done, run_of):  # a job's keys come grouped by run: each run looked up once
            run = runs.get(run_id)
            if run is None:
                continue  # not this partition's run
            deleted = None
            for _, path in keys:
                found = owed(run, path)
                if found is None:
                    continue  # settled meanwhile (a retried confirmation)
                if deleted is None:
                    deleted = by_run.setdefault(run_id, ([], []))[0]
                deleted.append((path, found[1].eviction))
        for (run_id, path), why in refused:
            run = runs.get(run_id)
            found = None if run is None else owed(run, path)
            if found is not None:
                by_run.setdefault(run_id, ([], []))[1].append((path, found[1].eviction, why))
        completed = self.pipeline.factory.deletion_completed
        return [
            completed(run_id, deleted[at : at + COMPLETED_PER_EVENT], refusals[at : at + COMPLETED_PER_EVENT])
            for run_id, (deleted, refusals) in by_run.items()
            for at in range(0, max(len(deleted), len(refusals)), COMPLETED_PER_EVENT)
        ]

    def still_owed_many(self, run_id: str, paths: Sequence[str]) -> list[str | None]:
        """Why this partition's current state does not owe deleting each of `paths` of run `run_id`
        now (None: it does), in order (the run looked up once)."""
        if not self.pipeline.usable:
            return [f"{self.pid} is closed here; its next owner re-drives what is still owed"] * len(paths)
        run = self.fold.runs.get(run_id)
        return [deletion_problem(run, path) for path in paths]

    def owns(self, run_id: str) -> bool:
        return run_id in self.fold.runs

    async def close(self, graceful: bool) -> None:
        """Graceful: flush extra outputs, final snapshot. Either way: stop the publisher."""
        if self.pipeline.closed:
            return
        async with self.lock:
            for background in (self._check, self._redriving):
                if background is not None:
                    background.cancel()
            await self.pipeline.close(graceful)
            log.info(
                "event=partition_closed partition=%s graceful=%s next_offset=%d consumed=%d published=%d",
                self.pid,
                graceful,
                self.pipeline.next_offset,
                self.pipeline.stats.consumed,
                self.pipeline.stats.published,
            )
