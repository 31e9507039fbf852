"""`PartitionDriver`: drives each assigned input partition through its lifecycle (lifecycle.py).

It is the consumer's rebalance listener: revocation closes a partition gracefully (final
snapshot); assignment pauses it and restores it (snapshot + replay: tasks.py, restore.py) in a
background job (restore_jobs.py), outside aiokafka's callback. A restore's outcome is then one of:
live and fetching (`_activate`), retried later (transient), fatal (the processor stops), or void
(a rebalance overtook it: `_void`). Each poll-loop round (`housekeeping`) retries the restores due
again and recovers a broken partition: a fenced producer means another instance owns it (its task
is dropped and the group rejoined); any other failed commit rebuilds it in place.

Every restore — an assignment's, a retry, a rebuild — runs as a background job (restore_jobs.py),
never awaited by the poll loop or a callback: a restore of a big partition takes seconds, and the
loop must go on folding the other partitions' batches meanwhile (issue 39). The partition stays
paused until its restore seeks it, and a rebalance voids a job's outcome (`Partitions.current`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict

from ckptlog.errors import CkptlogError, OffsetOutOfRange, StorageError
from ckptlog.kafka.errors import FencedError, KafkaIOError
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.service.advice import idle_message
from ckptlog.processor.service.lifecycle import Partition, Partitions, Phase
from ckptlog.processor.service.metrics import PrometheusMetrics
from ckptlog.processor.service.partition import PartitionTask, TaskStats
from ckptlog.processor.service.ports import InputConsumer
from ckptlog.processor.service.restore_jobs import RestoreJobs
from ckptlog.processor.service.settings import ServiceSettings
from ckptlog.processor.service.tasks import TaskFactory

log = logging.getLogger("ckptlog.processor.service.processor")  # the processor's story, one logger


def _transient(error: BaseException) -> bool:
    """Worth retrying the restore: I/O that may work next time, or another instance still holding
    the partition's producer. Not: a snapshot or log the operator must fix (RestoreError,
    OffsetOutOfRange, SnapshotVersionError), a bad setting, or a bug."""
    return isinstance(error, KafkaIOError | StorageError)


class PartitionDriver:
    """The lifecycle of every partition assigned to one processor; see the module docstring."""

    def __init__(
        self,
        settings: ServiceSettings,
        metrics: PrometheusMetrics,
        stopping: asyncio.Event,
        fail: Callable[[BaseException, str], None],
    ) -> None:
        self.settings, self.metrics = settings, metrics
        self.partitions = Partitions()  # every assigned partition's phase (lifecycle.py)
        self.ready = asyncio.Event()  # the first assignment's restores are done
        self.closed_stats = TaskStats()  # of the tasks closed so far
        self.rejoins = 0  # times a fenced partition made this instance rejoin the group
        self.rebuilds = 0  # times a partition was restored again after a failed commit
        self.jobs = RestoreJobs(fail)  # the restores, beside the poll loop
        self._stopping, self._fail = stopping, fail
        self.consumer: InputConsumer | None = None  # set once the processor has built them
        self.factory: TaskFactory | None = None

    # -- each poll-loop round --------------------------------------------------------

    async def housekeeping(self, consumer: InputConsumer) -> None:
        due = self.partitions.due()
        for partition in due:
            partition.retry(self.partitions.epoch)
        if due:
            self.jobs.start(lambda: self.restore(due), name=f"retry {','.join(str(p.pid) for p in due)}")
        for partition in self.partitions:
            if partition.phase is Phase.BROKEN:
                await self._recover(consumer, partition)
                return
            if partition.task is not None:
                await partition.task.tick(consumer.position)

    async def _recover(self, consumer: InputConsumer, partition: Partition) -> None:
        """A broken partition: stop (data loss), rejoin the group (fenced), or restore it again."""
        error, pid = partition.error, partition.pid
        if isinstance(error, OffsetOutOfRange):
            raise error
        if isinstance(error, FencedError):
            fenced = partition.rebuild(self.partitions.epoch)  # counts towards TooManyRebuilds
            log.warning("event=fenced partition=%s action=rejoin_group", pid)
            self.rejoins += 1
            if fenced is not None:
                await self.close_task(fenced, graceful=False)
            partition.close()
            await self.close_all(graceful=True)
            consumer.rejoin()
            return
        log.warning("event=rebuild partition=%s reason=%r", pid, error)
        self.rebuilds += 1
        task = partition.rebuild(self.partitions.epoch)
        consumer.pause([pid])  # nothing fetched for it until its restore seeks it
        self.jobs.start(lambda: self._rebuild(partition, task), name=f"rebuild {pid}")

    async def _rebuild(self, partition: Partition, broken: PartitionTask | None) -> None:
        """Close the broken task (its last snapshot write may take a while), then restore again."""
        if broken is not None:
            await self.close_task(broken, graceful=False)
        await self.restore([partition])

    # -- rebalance listener ----------------------------------------------------------

    async def partitions_revoked(self, partitions: list[PartitionId]) -> None:
        revoked = self.partitions.revoke(partitions)  # every restore in flight is void from now on
        log.info("event=partitions_revoked partitions=%s", ",".join(str(p.pid) for p in revoked if p.task) or "-")
        await asyncio.gather(*(self._close(partition, graceful=True) for partition in revoked))

    async def partitions_assigned(self, partitions: list[PartitionId]) -> None:
        """Start restoring the new partitions and return at once: aiokafka sends no heartbeats until
        this callback returns, and a restore may outlast the session timeout (restore_jobs.py). The
        new partitions stay paused — nothing fetched for them — until `_activate` seeks them."""
        log.info("event=partitions_assigned partitions=%s", ",".join(map(str, partitions)) or "-")
        if not partitions:
            log.warning(idle_message(self.settings))
        fresh = [self.partitions.assign(pid) for pid in partitions if pid not in self.partitions]
        if fresh:
            assert self.consumer is not None
            self.consumer.pause([p.pid for p in fresh])
        if not fresh and not self.jobs:
            self.ready.set()
            return
        epoch, names = self.partitions.epoch, ",".join(str(p.pid) for p in fresh) or "-"
        self.jobs.start(lambda: self._restore_assigned(fresh, epoch), name=f"restore {names}")

    async def _restore_assigned(self, fresh: Sequence[Partition], epoch: int) -> None:
        """An assignment's restores; `ready` once they are done, unless a rebalance overtook them
        (the next assignment's job sets it then)."""
        await self.restore(fresh)
        if self.partitions.epoch == epoch:
            self.ready.set()

    # -- restores and their outcomes ---------------------------------------------------

    async def restore(self, partitions: Sequence[Partition]) -> None:
        """The restore step of each partition's lifecycle (tasks.py), then what its outcome means:
        live and fetching, retried later (transient), fatal, or void (see `_void`)."""
        if not partitions:
            return
        assert self.factory is not None
        factory = self.factory
        # A job queued behind another may find its partitions revoked already: those open nothing (under
        # exactly_once, opening starts the partition's transactional producer and fences its new owner's).
        begun = [p for p in partitions if self.partitions.current(p)]
        opened = await asyncio.gather(*(factory.open(p) for p in begun), return_exceptions=True)
        outcome: dict[int, PartitionTask | BaseException] = {id(p): r for p, r in zip(begun, opened, strict=True)}
        for partition in partitions:
            result = outcome.get(id(partition))
            if result is None or not self.partitions.current(partition):
                await self._void(partition, result)
            elif isinstance(result, BaseException) and _transient(result):
                assert isinstance(result, CkptlogError)
                self._retry_later(partition, result)
            elif isinstance(result, BaseException):
                self._fail(result, str(partition.pid))
            else:
                self._activate(partition, result)

    async def _void(self, partition: Partition, result: PartitionTask | BaseException | None) -> None:
        """A restore a rebalance overtook (`result` None: before it began, so nothing was opened): its
        outcome, success or failure, is void — it read offsets
        another owner may have moved since, and its seek would land on another assignment. The
        assignment since restores the partition on its own; one still assigned (a rebalance that
        kept it) is restored again here."""
        log.info("event=restore_dropped partition=%s reason=a rebalance overtook the restore", partition.pid)
        self.metrics.restore_dropped()
        still = self.partitions.get(partition.pid) is partition
        task = partition.close()
        if isinstance(result, PartitionTask):
            await result.close(graceful=False)
        elif task is not None:
            await task.close(graceful=False)
        if still and not self._stopping.is_set():
            await self.restore([self.partitions.assign(partition.pid)])

    def _retry_later(self, partition: Partition, error: CkptlogError) -> None:
        """A transient failure to restore one partition: retry it with backoff while the others go on
        (issue 13: it used to stop the whole processor). The partition stays paused meanwhile."""
        delay = partition.restore_failed(error)
        self.metrics.restore_failed()
        log.warning(
            "event=restore_failed partition=%s attempt=%d retry_in_s=%.1f error=%s; the other partitions go on",
            partition.pid,
            partition.attempts,
            delay,
            error,
        )

    def _activate(self, partition: Partition, task: PartitionTask) -> None:
        """Seek, then RESTORING -> REPLAYING (-> LIVE when nothing is left to replay), then resume:
        records of the partition only ever reach its own task. The task becomes the partition's
        only after the seek: until then the consumer's position is the group's committed offset,
        which the task's tick would take for the end of its replay (a live fold that never read
        the records before it: a restore that ran beside a slower one's did exactly that)."""
        assert self.consumer is not None and partition.task is None
        crash_point("restore.before_seek")
        self.consumer.seek(partition.pid, task.pipeline.next_offset)
        partition.restored(task)
        if task.pipeline.folded_offset >= task.pipeline.publish_from:
            task.catch_up()
        self.consumer.resume([partition.pid])

    # -- closing -----------------------------------------------------------------------

    async def _close(self, partition: Partition, graceful: bool) -> None:
        """Close the partition's task (graceful: final snapshot), then the partition."""
        task = partition.task
        if task is not None:
            await self.close_task(task, graceful)
        partition.close()

    async def close_task(self, task: PartitionTask, graceful: bool) -> None:
        try:
            await task.close(graceful)
        except CkptlogError as exc:
            log.error("event=close_failed partition=%s error=%s", task.pid, exc)
        for name, value in asdict(task.pipeline.stats).items():
            setattr(self.closed_stats, name, getattr(self.closed_stats, name) + value)

    async def close_all(self, graceful: bool) -> None:
        """Close every partition's task; the partitions stay assigned, restored again when due."""
        closing = [(p, p.task) for p in self.partitions if p.task is not None]
        await asyncio.gather(*(self.close_task(task, graceful and p.broken is None) for p, task in closing))
        for partition, _ in closing:
            partition.close()
