"""One input partition's batches, stage by stage: decode → apply → emit → claim → commit → after-commit.

`Pipeline.submit` is the walk of one batch, each stage a named method (as eventsourcing's
`Application.save` is the walk of one save):

1. decode, 2. apply, 3. emit — in memory, record by record, in the caller (`BatchFolder`,
   batch.py, which `Pipeline` extends). Records below `publish_from` (published by an earlier
   owner) are only decoded and applied; just before the first one at or above it the fold equals
   the durable state, and `on_caught_up` is called.
4. claim — the storage told, before the commit, what the batch registered and retired. The roots
   it registered are first looked at for a symlink (service/linked.py: a root a link leads to gets
   the `root_refused` fact and its run_started's dead letter among the batch's records, so in its
   transaction), then claimed at once (contract §9: a claim of a batch whose commit then fails is
   made again when it is folded again, and harmless); the runs it retired get their retired
   claims, as of its last input offset. Outputs made outside the fold (`extra`:
   `checkpoints_missing`) ride along.
5. commit — exactly_once: the batch's records and its consumed offset in one transaction;
   at_least_once: published (every record acknowledged), then the offset committed (publish.py).
   A failure marks the partition broken: the fold ran ahead of what is durable, so it must be
   restored again (snapshot + replay) before it is used.
6. after-commit — only now that the batch is durable: the runs it reopened get their retired
   claims removed (contract §3 "Reopened runs"), its evictions go to the deleter; then the
   snapshot, if `snapshot_if_due` (the one place that decides) says so.

Stages 1-4 run in the caller; 5-6 in the background, so the next batch folds while this one
commits. Commits stay strictly sequential: a batch's stage 5 starts only once the previous
batch's 5-6 are done (`settle`). The partition's task (partition.py) owns its pipeline and
serialises its callers; the partition's phase is `life` (lifecycle.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter

from ckptlog.errors import CkptlogError
from ckptlog.kafka.records import InputRecord, OutRecord, PartitionId
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.service.batch import Batch, BatchFolder
from ckptlog.processor.service.errors import ServiceError
from ckptlog.processor.service.lifecycle import Partition
from ckptlog.processor.service.linked import refuse_linked
from ckptlog.processor.service.metrics import NO_METRICS, ServiceMetrics
from ckptlog.processor.service.ports import ClaimSink, DeletionSink
from ckptlog.processor.service.publish import Publisher
from ckptlog.processor.service.records import RecordFactory
from ckptlog.processor.service.restore import Restored
from ckptlog.processor.service.snapshotting import SnapshotScheduler

log = logging.getLogger(__name__)

run_of = itemgetter(0)  # Deletion.run_id, or a (run id, path) key's run id: what evictions and completions group by


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

    def add(self, batch: Batch) -> None:
        self.consumed += batch.consumed
        self.applied += batch.applied
        self.rejected += batch.rejected
        self.duplicates += batch.duplicates
        self.batches += 1


class Pipeline(BatchFolder):
    """The six stages of one input partition's batches (see the module docstring)."""

    def __init__(
        self,
        life: Partition,
        restored: Restored,
        factory: RecordFactory,
        publisher: Publisher,
        snapshots: SnapshotScheduler,
        deleter: DeletionSink,
        claims: ClaimSink,
        on_caught_up: Callable[[], None],
        metrics: ServiceMetrics = NO_METRICS,
    ) -> None:
        super().__init__(restored.fold, factory)
        self.life, self.pid = life, life.pid  # the partition's phase: replaying, live, broken (lifecycle.py)
        self.publisher, self.metrics = publisher, metrics
        self.snapshots, self.deleter, self.claims, self._on_caught_up = snapshots, deleter, claims, on_caught_up
        self.next_offset = restored.start  # everything below is durable (committed, or below publish_from)
        self.folded_offset = restored.start  # everything below is folded
        self.publish_from = restored.publish_from  # the group's committed offset at restore
        self.extra: list[OutRecord] = []  # outputs made outside the fold; they ride along with the next commit
        self.closed = False  # close() began: nothing more is folded or committed
        self.stats = TaskStats()
        self._pending: asyncio.Task[None] | None = None
        self._last_batch = 0.0

    @property
    def usable(self) -> bool:
        return not self.closed and self.life.usable

    @property
    def broken(self) -> CkptlogError | None:
        return self.life.broken

    @property
    def caught_up(self) -> bool:
        return self.life.live

    @property
    def in_flight(self) -> bool:
        """A commit (stages 5-6) is still running."""
        return self._pending is not None and not self._pending.done()

    # -- the walk ---------------------------------------------------------------------------------

    async def submit(self, records: Sequence[InputRecord]) -> None:
        """The walk of one batch (offsets from `folded_offset` on): stages 1-4 now, 5-6 in the background."""
        await self.snapshot_if_due(drain=True)  # under steady load the only point where the fold is settled
        if self.broken is not None:  # the commit it may have waited for failed: folding further is moot
            return
        started = time.perf_counter()
        batch = self.fold_batch(records)  # 1-3: decode → apply → emit
        if batch is None:
            return
        await self.claim(batch)  # 4
        self._ready(batch, started)
        if not await self.settle():  # one commit at a time
            return
        self._pending = asyncio.get_running_loop().create_task(self._durable(batch))

    async def _durable(self, batch: Batch) -> None:
        if await self.commit(batch):  # 5
            await self.after_commit(batch)  # 6

    # -- stages 1-4, per batch ---------------------------------------------------------------------

    def fold_batch(self, records: Sequence[InputRecord]) -> Batch | None:
        """Stages 1-3 over `records`. None when folding raised outside the fold's own all-or-nothing:
        the partition is broken."""
        self._last_batch = time.monotonic()
        try:
            batch = self._fold(records)
        except Exception as exc:  # never snapshot this state
            log.exception("event=fold_failed at=%s@%d last=%d", self.pid, records[0].offset, records[-1].offset)
            self.life.broke(
                ServiceError(
                    f"{self.pid}: folding offsets {records[0].offset}..{records[-1].offset} raised {exc!r}; the "
                    "partition is restored again (snapshot + replay) — please report this as a ckptlog bug"
                )
            )
            return None
        self.folded_offset = batch.end
        return batch

    def _fold(self, records: Sequence[InputRecord]) -> Batch:
        if self.caught_up or records[-1].offset < self.publish_from:
            return self.fold_records(records, self.publish_from)
        split = next(i for i, r in enumerate(records) if r.offset >= self.publish_from)
        batch = self.fold_records(records[:split], self.publish_from)
        self._on_caught_up()  # before the first live record: the state equals the durable one
        batch.merge(self.fold_records(records[split:], self.publish_from))
        return batch

    async def claim(self, batch: Batch) -> None:
        """Stage 4, before the commit: the roots the batch registered looked at for a symlink, the fact
        and dead letter of each one a link leads to added to its records (service/linked.py), then
        claimed, not after the commit (contract §9); the runs it retired get their retired claims
        (their roots barred for good, the same id's included), as of its last input offset."""
        if batch.claims:
            await refuse_linked(batch, self.factory, self.fold.settings.outer_root)
            self.claims.claim_many(batch.claims, str(self.pid))
        if batch.retired:
            self.claims.claim_many(batch.retired, str(self.pid), retired=True, at=batch.end - 1)

    def _ready(self, batch: Batch, started: float) -> None:
        """The batch ready to commit: the extra outputs ride along; stages 1-4 timed."""
        crash_point("batch.folded")
        if self.extra:
            batch.records.extend(self.extra)
            self.extra = []
        elapsed = time.perf_counter() - started
        self.stats.fold_s += elapsed
        self.metrics.folded(batch, elapsed)

    # -- stages 5-6 --------------------------------------------------------------------------------

    async def commit(self, batch: Batch) -> bool:
        """Stage 5: the batch's records and, when it reached publish_from, its consumed offset made
        durable; False (and broken) when that failed."""
        offsets = {self.pid: batch.end} if batch.live else {}
        return await self._commit(batch.records, offsets, batch.end, batch)

    async def after_commit(self, batch: Batch) -> None:
        """Stage 6, once the batch is durable: the retired claims of the runs it reopened removed, as
        of its last input offset (a retirement a later batch folded meanwhile stands: ClaimWriter);
        its evictions to the deleter, grouped by run (so that a Deleter job, <= 100 paths, mostly
        serves one run and confirms them in one completion event); then the snapshot, if due."""
        self.stats.add(batch)
        if batch.reopened:
            self.claims.claim_many(batch.reopened, str(self.pid), reopened=True, at=batch.end - 1)
        if batch.deletions:
            crash_point("deletions.before_handover")
            self.deleter.submit_many(sorted(batch.deletions, key=run_of), str(self.pid))
            crash_point("deletions.after_handover")
        self.snapshots.count(batch.consumed)
        await self.snapshot_if_due()

    async def _commit(
        self, records: list[OutRecord], offsets: dict[PartitionId, int], next_offset: int, batch: Batch | None = None
    ) -> bool:
        """Make `records` and the consumed offsets durable; False (and broken) when that failed."""
        started = time.perf_counter()
        try:
            if records or offsets:
                crash_point("commit.before")
                await self.publisher.commit(records, offsets)
                crash_point("commit.after")
                self.metrics.committed(batch, time.perf_counter() - started)
        except asyncio.CancelledError:
            self.life.broke(
                ServiceError(
                    f"{self.pid}: cancelled in the middle of a commit; the partition must be "
                    "restored before it is used again"
                )
            )
            raise
        except CkptlogError as exc:
            self.life.broke(exc)
            self.metrics.commit_failed()
            log.error(
                "event=commit_failed at=%s@%d records=%d error=%s",
                self.pid,
                next_offset,
                len(records),
                exc,
            )
            return False
        seconds = time.perf_counter() - started
        self.stats.commit_s += seconds
        self.stats.published += len(records)
        log.debug(
            "event=committed partition=%s next_offset=%d records=%d seconds=%.4f",
            self.pid,
            next_offset,
            len(records),
            seconds,
        )
        self.next_offset = next_offset
        return True

    async def settle(self) -> bool:
        """Wait for the in-flight commit; False when it (or an earlier one) failed."""
        pending, self._pending = self._pending, None
        if pending is not None:
            await asyncio.shield(pending)
        return self.broken is None

    async def flush_extra(self, idle_s: float) -> None:
        """Commit the extra outputs on their own once no batch has carried them for `idle_s`."""
        if self.extra and self.broken is None and time.monotonic() - self._last_batch >= idle_s:
            extra, self.extra = self.extra, []
            await self._commit(extra, {}, self.next_offset)

    async def snapshot_if_due(self, *, drain: bool = False, final: bool = False) -> None:
        """The one place that decides to snapshot. A snapshot is written when

        - it is due: every N events or T seconds (`final`, at revocation and shutdown: anything
          committed since the last one), and the pipeline is not broken;
        - no snapshot write is in flight (`final` waits for it instead);
        - the fold holds exactly the committed state (`folded_offset == next_offset`): nothing
          folded is waiting to commit. `drain` first waits for the in-flight commit to make it so
          (before folding further, under steady load the only moment the two meet).

        The state is encoded now; `final` also waits for the write."""
        if final:
            await self.snapshots.wait()
        if not self._due(final) or (drain and not (await self.settle() and self._due(final))):
            return  # after draining, that commit's own stage 6 may have taken it already
        if self.folded_offset == self.next_offset:
            self.snapshots.start(self.fold, self.next_offset, final=final)
            if final:
                await self.snapshots.wait()

    def _due(self, final: bool) -> bool:
        if self.broken is not None or (self.closed and not final) or self.snapshots.writing:
            return False
        return self.snapshots.due(self.next_offset, final=final)

    async def close(self, graceful: bool) -> None:
        """Settle; graceful: commit the extra outputs and write the final snapshot. Then stop the publisher."""
        await self.settle()
        self.closed = True
        if graceful and self.broken is None:
            await self.flush_extra(0.0)
            crash_point("close.before_final_snapshot")
            await self.snapshot_if_due(final=True)
            crash_point("close.after_final_snapshot")
        else:
            await self.snapshots.wait()
        await self.publisher.close()
