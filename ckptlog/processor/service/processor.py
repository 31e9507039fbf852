"""`Processor`: the ckptlog service. Consume the input topic in a group, fold each assigned
partition with exactly one `PartitionTask`, publish, snapshot, delete evicted checkpoints.

    processor = Processor(load_settings(storage_root="file:///runs"))
    task = asyncio.create_task(processor.run())
    await processor.ready.wait()
    ...
    processor.stop(); await task        # finish the batch, commit, snapshot, exit

Each assigned partition's life is one state machine (lifecycle.py: restoring, retrying,
replaying, live, broken, closed); this module drives its transitions. Rebalances: revocation
closes a partition gracefully (final snapshot); assignment pauses it and restores it (snapshot +
replay: tasks.py, restore.py) in a background job (restore_jobs.py), outside aiokafka's callback.
A fenced producer means another instance owns the partition: its task is dropped and the group
rejoined. Any other failed commit rebuilds the partition in place.

Kafka clients come from a `KafkaClients` factory (ports.py): by default
`ckptlog.kafka.BrokerClients` over the configured (or embedded) broker; tests pass fakes.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from itertools import groupby

from ckptlog.broker import ensure_bootstrap
from ckptlog.errors import CkptlogError, OffsetOutOfRange, StorageError
from ckptlog.kafka.errors import FencedError, KafkaIOError
from ckptlog.kafka.factory import BrokerClients
from ckptlog.kafka.producers import MAX_RECORD_BYTES
from ckptlog.kafka.records import InputRecord, PartitionId
from ckptlog.kafka.topics import TopicSpec
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.service.advice import idle_message, start_advice
from ckptlog.processor.service.completions import CompletionWriter
from ckptlog.processor.service.errors import ServiceError
from ckptlog.processor.service.lifecycle import Partition, Partitions, Phase
from ckptlog.processor.service.metrics import PrometheusMetrics
from ckptlog.processor.service.observe import observed
from ckptlog.processor.service.partition import PartitionTask, TaskStats, run_of
from ckptlog.processor.service.ports import ClaimService, DeletionService, InputConsumer, KafkaClients, SharedProducer
from ckptlog.processor.service.records import TopicNames
from ckptlog.processor.service.restore_jobs import RestoreJobs
from ckptlog.processor.service.settings import ServiceSettings
from ckptlog.processor.service.tasks import TaskFactory
from ckptlog.processor.storage.claim_writer import ClaimWriter
from ckptlog.processor.storage.deletion import Deleter

log = logging.getLogger(__name__)

RETRY_FAILED_DELETIONS_S = 30.0


def _transient(error: BaseException) -> bool:
    """Worth retrying the restore: I/O that may work next time, or another instance still holding
    the partition's producer. Not: a snapshot or log the operator must fix (RestoreError,
    OffsetOutOfRange, SnapshotVersionError), a bad setting, or a bug."""
    return isinstance(error, KafkaIOError | StorageError)


def tune_gc() -> None:
    """Process-wide GC setting for a long-running processor (the CLI calls it; embedders may).

    The hot path allocates many short-lived, acyclic objects; with the default thresholds the
    collector's full passes rescan a heap that grows with the state (outstanding deletions, dedup
    windows), so the per-event cost grew with history. Freezing start-up objects and collecting
    the young generation less often keeps it flat (measured: 59 -> 37 us/event at 200k events)."""
    gc.freeze()
    gc.set_threshold(100_000, 50, 1000)


def topic_specs(settings: ServiceSettings) -> list[TopicSpec]:
    big = {"max.message.bytes": str(MAX_RECORD_BYTES)}
    compacted = {**big, "cleanup.policy": "compact", "min.compaction.lag.ms": "0", "segment.ms": "3600000"}
    return [
        TopicSpec(settings.input_topic, settings.topic_partitions),
        TopicSpec(settings.checkpoints_topic, config=big),
        TopicSpec(settings.validations_topic, config=big),
        TopicSpec(settings.watermarks_topic),
        TopicSpec(settings.state_topic, config=compacted),
        TopicSpec(settings.dlq_topic, config=big),
    ]


DeleterFactory = Callable[..., DeletionService]
"""Builds the deleter: keyword arguments outer_root, on_done (called with a batch of confirmed (run id, path)
keys), on_refused (with (key, why) of deletions refused for good), recheck (asked for each key right before
it is deleted: why not, or None), claims (the claim writer, asked which paths wait), concurrency,
storage_options."""

ClaimsFactory = Callable[..., ClaimService]
"""Builds the claim writer: keyword arguments outer_root, storage_options."""


class Processor:
    def __init__(
        self,
        settings: ServiceSettings,
        *,
        clients: KafkaClients | None = None,
        deleter_factory: DeleterFactory = Deleter,
        claims_factory: ClaimsFactory = ClaimWriter,
        metrics: PrometheusMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics or PrometheusMetrics()  # served on --metrics-port (observe.py)
        self.last_poll = time.monotonic()  # the poll loop went round (/healthz)
        self.metrics_url: str | None = None  # where --metrics-port serves, once run() started it
        self._clients = clients  # None: BrokerClients, built in run() (the embedded broker may need starting)
        self._deleter_factory, self._claims_factory = deleter_factory, claims_factory
        self.names = TopicNames.of(settings)
        self.partitions = Partitions()  # every assigned partition's phase (lifecycle.py)
        self.ready = asyncio.Event()
        self.closed_stats = TaskStats()
        self.rejoins = 0  # times a fenced partition made this instance rejoin the group
        self.rebuilds = 0  # times a partition was restored again after a failed commit
        self._stopping = asyncio.Event()
        self._fatal: BaseException | None = None
        self._consumer: InputConsumer | None = None
        self._shared: SharedProducer | None = None
        self._completions: CompletionWriter | None = None
        self._deleter: DeletionService | None = None
        self._claims: ClaimService | None = None
        self._factory: TaskFactory | None = None
        self._restores = RestoreJobs(self._fail)  # the assignments' restores, beside the poll loop

    # -- public API ----------------------------------------------------------------

    def stop(self) -> None:
        """Ask `run()` to finish the current batch, commit, snapshot and return."""
        self._stopping.set()

    @property
    def tasks(self) -> dict[PartitionId, PartitionTask]:
        """The partitions that have a task (replaying, live, or broken and about to be rebuilt)."""
        return self.partitions.tasks()

    @property
    def assignment(self) -> list[PartitionId]:
        return sorted(self.tasks)

    def stats(self) -> TaskStats:
        total = TaskStats(**asdict(self.closed_stats))
        for task in self.tasks.values():
            for name, value in asdict(task.pipeline.stats).items():
                setattr(total, name, getattr(total, name) + value)
        return total

    @property
    def assigned(self) -> frozenset[PartitionId]:
        """Partitions the group assigned to this instance (restored or not)."""
        return self.partitions.assigned

    @property
    def consumer(self) -> InputConsumer | None:
        return self._consumer

    @property
    def deleter(self) -> DeletionService | None:
        return self._deleter

    @property
    def claims(self) -> ClaimService | None:
        return self._claims

    def readiness(self) -> tuple[bool, str]:
        """Ready (/readyz) once every assigned partition is live: restored, and its fold reached the
        group's committed offset, i.e. holds exactly the durable state; why not, otherwise."""
        if self._stopping.is_set():
            return False, "stopping"
        if not self.ready.is_set():
            return False, "waiting for the first partition assignment"
        waiting = self.partitions.not_ready()
        if waiting:
            return False, f"not restored and caught up yet: {', '.join(map(str, waiting))}"
        return True, f"ready: {len(self.partitions.assigned)} partition(s) restored and caught up"

    async def run(self) -> None:
        """Run until `stop()`; raises a CkptlogError when a partition cannot be restored or served."""
        async with observed(self) as server:  # /metrics, /healthz, /readyz on --metrics-port (off by default)
            self.metrics_url = server.url if server is not None else None
            await self._run()

    async def _run(self) -> None:
        clients = self._clients = self._clients or await self._broker_clients()
        await self._ensure_topics(clients)
        storage_root, options = self.settings.storage_root, self.settings.checkpoint_storage_options
        self._claims = self._claims_factory(outer_root=storage_root, storage_options=options)
        self._deleter = self._deleter_factory(
            outer_root=storage_root,
            on_done=self._deletions_done,
            on_refused=self._deletions_refused,
            recheck=self._still_owed,
            claims=self._claims,  # a deletion in, at or around a root whose retired claim is pending waits
            concurrency=self.settings.deletion_concurrency,
            storage_options=options,
        )
        try:
            self._shared = clients.shared_producer()  # at_least_once outputs, deletion completions
            await self._shared.start()
            self._completions = CompletionWriter(self._shared)
            self._completions.start()
            self._consumer = clients.consumer(
                self.settings.input_topic,
                self,
                max_records=self.settings.max_batch_records,
                session_timeout_ms=self.settings.session_timeout_ms,
                group_instance_id=self.settings.group_instance_id,
            )
            self._factory = TaskFactory(
                self.settings,
                self.names,
                clients,
                self._consumer,
                self._deleter,
                self._claims,
                self._shared,
                self.metrics,
            )
            await self._consumer.start()
            await self._loop(self._consumer)
        finally:
            await self._shutdown()

    async def _broker_clients(self) -> KafkaClients:
        """The real clients; without --bootstrap-servers, of the embedded broker (started if needed)."""
        bootstrap = self.settings.bootstrap_servers
        if not bootstrap:
            bootstrap = await asyncio.to_thread(ensure_bootstrap, None)
        return BrokerClients(self.settings.connection(bootstrap), self.settings.group_id, self.settings.txn_prefix)

    async def _ensure_topics(self, clients: KafkaClients) -> None:
        """The input topic first: the output topics get as many partitions as it has."""
        settings = self.settings
        specs, rf = topic_specs(settings), settings.replication_factor
        counts = await clients.ensure_topics(specs[:1], settings.topic_partitions or 1, rf)
        await clients.ensure_topics(specs[1:], settings.topic_partitions or counts[settings.input_topic], rf)
        if settings.storage_root is None:
            log.warning(
                "event=no_storage_root: without --storage-root any run may declare any storage_path that is not a "
                "filesystem root or a bucket, and have what lies below it deleted as evictions; set it to the "
                "directory every run's checkpoints live under (docs/processor.md, Deployment)"
            )
        for advice in start_advice(settings):
            log.warning(advice)
        log.info(
            "event=starting bootstrap=%s group=%s guarantee=%s input=%s partitions=%d snapshots=%s",
            clients.servers,
            settings.group_id,
            settings.guarantee,
            settings.input_topic,
            counts[settings.input_topic],
            settings.snapshots,
        )

    # -- main loop -----------------------------------------------------------------

    async def _loop(self, consumer: InputConsumer) -> None:
        last_retry = time.monotonic()
        while not self._stopping.is_set():
            self.last_poll = time.monotonic()
            polled = await consumer.poll(self.settings.poll_timeout_ms)
            self._raise_fatal()
            work = [(task, records) for pid, records in polled.items() if (task := self._task_for(pid, records))]
            if work:
                await asyncio.gather(*(task.process(records) for task, records in work))
            await self._housekeeping(consumer)
            if self._deleter is not None and time.monotonic() - last_retry > RETRY_FAILED_DELETIONS_S:
                last_retry = time.monotonic()
                self._deleter.retry_failed()
        self._raise_fatal()  # a restore beside the loop (or a retry in it) failed for good
        log.info("event=stopping reason=stop_requested")

    def _task_for(self, pid: PartitionId, records: Sequence[InputRecord]) -> PartitionTask | None:
        partition = self.partitions.get(pid)
        task = partition.task if partition is not None else None
        if task is None:  # revoked while the poll was returning: the next owner restores and re-reads them
            log.warning(
                "event=records_without_task partition=%s first=%d count=%d", pid, records[0].offset, len(records)
            )
        return task

    async def _housekeeping(self, consumer: InputConsumer) -> None:
        due = self.partitions.due()
        for partition in due:
            partition.retry(self.partitions.epoch)
        if due:
            await self._restore(due)
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
                await self._close_task(fenced, graceful=False)
            partition.close()
            await self._close_all(graceful=True)
            consumer.rejoin()
            return
        log.warning("event=rebuild partition=%s reason=%r", pid, error)
        self.rebuilds += 1
        task = partition.rebuild(self.partitions.epoch)
        if task is not None:
            await self._close_task(task, graceful=False)
        await self._restore([partition])

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    # -- rebalance listener --------------------------------------------------------

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
            assert self._consumer is not None
            self._consumer.pause([p.pid for p in fresh])
        if not fresh and not self._restores:
            self.ready.set()
            return
        epoch, names = self.partitions.epoch, ",".join(str(p.pid) for p in fresh) or "-"
        self._restores.start(lambda: self._restore_assigned(fresh, epoch), name=f"restore {names}")

    async def _restore_assigned(self, fresh: Sequence[Partition], epoch: int) -> None:
        """An assignment's restores; `ready` once they are done, unless a rebalance overtook them
        (the next assignment's job sets it then)."""
        await self._restore(fresh)
        if self.partitions.epoch == epoch:
            self.ready.set()

    async def _restore(self, partitions: Sequence[Partition]) -> None:
        """The restore step of each partition's lifecycle (tasks.py), then what its outcome means:
        live and fetching, retried later (transient), fatal, or void (see `_void`)."""
        if not partitions:
            return
        assert self._factory is not None
        factory = self._factory
        results = await asyncio.gather(*(factory.open(p) for p in partitions), return_exceptions=True)
        for partition, result in zip(partitions, results, strict=True):
            if not self.partitions.current(partition):
                await self._void(partition, result)
            elif isinstance(result, BaseException) and _transient(result):
                assert isinstance(result, CkptlogError)
                self._retry_later(partition, result)
            elif isinstance(result, BaseException):
                self._fail(result, str(partition.pid))
            else:
                self._activate(partition, result)

    def _fail(self, error: BaseException, where: str) -> None:
        """A restore that cannot go on: the processor stops, and `run()` raises the error."""
        if not isinstance(error, CkptlogError):
            log.exception("event=open_failed partition=%s", where, exc_info=error)
            error = ServiceError(f"{where}: unexpected error while restoring: {error!r}; see the log")
        self._fatal = self._fatal or error
        self._stopping.set()

    async def _void(self, partition: Partition, result: PartitionTask | BaseException) -> None:
        """A restore a rebalance overtook: its outcome, success or failure, is void — it read offsets
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
            await self._restore([self.partitions.assign(partition.pid)])

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
        assert self._consumer is not None and partition.task is None
        crash_point("restore.before_seek")
        self._consumer.seek(partition.pid, task.pipeline.next_offset)
        partition.restored(task)
        if task.pipeline.folded_offset >= task.pipeline.publish_from:
            task.catch_up()
        self._consumer.resume([partition.pid])

    async def _close(self, partition: Partition, graceful: bool) -> None:
        """Close the partition's task (graceful: final snapshot), then the partition."""
        task = partition.task
        if task is not None:
            await self._close_task(task, graceful)
        partition.close()

    async def _close_task(self, task: PartitionTask, graceful: bool) -> None:
        try:
            await task.close(graceful)
        except CkptlogError as exc:
            log.error("event=close_failed partition=%s error=%s", task.pid, exc)
        for name, value in asdict(task.pipeline.stats).items():
            setattr(self.closed_stats, name, getattr(self.closed_stats, name) + value)

    async def _close_all(self, graceful: bool) -> None:
        """Close every partition's task; the partitions stay assigned, restored again when due."""
        closing = [(p, p.task) for p in self.partitions if p.task is not None]
        await asyncio.gather(*(self._close_task(task, graceful and p.broken is None) for p, task in closing))
        for partition, _ in closing:
            partition.close()

    def _owner(self, run_id: str) -> PartitionTask | None:
        """The task of the partition whose state holds the run (None: not this instance's)."""
        return next((task for task in self.tasks.values() if task.owns(run_id)), None)

    def _deletions_done(self, done: Sequence[tuple[str, str]]) -> None:
        """Confirmed deletions (one Deleter job's worth) become completion events on their runs' partitions.

        A job's keys come grouped by run (a batch's evictions are submitted sorted by run), so the
        owner is looked up once per run and the keys are moved in slices, not one by one."""
        if self._completions is None:
            return
        by_owner: dict[int, tuple[PartitionTask, list[tuple[str, str]]]] = {}
        for run_id, keys in groupby(done, run_of):
            owner = self._owner(run_id)
            if owner is not None:
                by_owner.setdefault(id(owner), (owner, []))[1].extend(keys)
        for owner, owned in by_owner.values():
            self._completions.extend(owner.deletions_settled(owned))

    def _deletions_refused(self, refused: Sequence[tuple[tuple[str, str], str]]) -> None:
        """Deletions the deleter will never carry out (contract §9) are settled too, so the run's state
        says so (a `deletion_refused` warning) instead of owing them forever."""
        for key, why in refused:
            owner = self._owner(key[0])
            if owner is not None and self._completions is not None:
                self._completions.extend(owner.deletions_settled((), [(key, why)]))

    def _still_owed(self, key: tuple[str, str]) -> str | None:
        """The deleter's last-moment re-check (contract §9): why not to delete now, or None."""
        owner = self._owner(key[0])
        if owner is None:
            return "its partition is not owned by this instance any more (the new owner re-drives it)"
        return owner.still_owed(*key)

    async def _shutdown(self) -> None:
        self._stopping.set()
        self.partitions.void_restores()  # a restore still running drops what it built (`_void`)
        await self._restores.settle()
        if self._deleter is not None and self._fatal is None:
            # the in-flight commits hand their evictions over; delete them while the partitions are ours
            await asyncio.gather(*(task.wait_committed() for task in list(self.tasks.values())))
            await self._deleter.drain(timeout=1.0)
        await self._close_all(graceful=self._fatal is None)
        if self._claims is not None:
            await self._claims.close()
        if self._deleter is not None:
            await self._deleter.close()
        if self._completions is not None:
            await self._completions.close()
        if self._consumer is not None:
            await self._consumer.stop()
        if self._shared is not None:
            await self._shared.stop()
        log.info("event=stopped %s", " ".join(f"{k}={v}" for k, v in asdict(self.stats()).items()))
