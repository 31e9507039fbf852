"""`Processor`: the ckptlog service. Consume the input topic in a group, fold each assigned
partition with exactly one `PartitionTask`, publish, snapshot, delete evicted checkpoints.

    processor = Processor(load_settings(storage_root="file:///runs"))
    task = asyncio.create_task(processor.run())
    await processor.ready.wait()
    ...
    processor.stop(); await task        # finish the batch, commit, snapshot, exit

Rebalances: revocation closes a partition gracefully (final snapshot); assignment restores
it (snapshot + replay; see restore.py). A fenced producer means another instance owns the
partition: its task is dropped and the group rejoined. Any other failed commit rebuilds the
partition in place.

Kafka clients come from a `KafkaClients` factory (ports.py): by default
`processor.kafka.BrokerClients` over the configured (or embedded) broker; tests pass fakes.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from itertools import groupby

from processor.broker import ensure_bootstrap
from processor.errors import CkptlogError, OffsetOutOfRange, StorageError
from processor.failpoints import crash_point
from processor.kafka.errors import FencedError, KafkaIOError
from processor.kafka.factory import BrokerClients
from processor.kafka.producers import MAX_RECORD_BYTES
from processor.kafka.records import InputRecord, PartitionId
from processor.kafka.topics import TopicSpec
from processor.service.advice import idle_message, start_advice
from processor.service.batch import BatchFolder
from processor.service.completions import CompletionWriter
from processor.service.errors import ServiceError, TooManyRebuilds
from processor.service.metrics import PrometheusMetrics
from processor.service.observe import observed
from processor.service.partition import PartitionTask, TaskStats, run_of
from processor.service.ports import DeletionService, InputConsumer, KafkaClients, SharedProducer
from processor.service.publish import AtLeastOncePublisher, ExactlyOncePublisher, Publisher
from processor.service.records import RecordFactory, TopicNames
from processor.service.restore import restore
from processor.service.settings import ServiceSettings
from processor.service.snapshotting import SnapshotScheduler
from processor.storage.deletion import Deleter
from processor.storage.snapshots import SnapshotStore

log = logging.getLogger(__name__)

MAX_REBUILDS = 5
REBUILD_WINDOW_S = 60.0
RETRY_FAILED_DELETIONS_S = 30.0
REOPEN_FIRST_S, REOPEN_MAX_S = 0.5, 30.0
"""Backoff of a partition whose restore failed for a transient reason (Kafka or storage I/O)."""


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
it is deleted: why not, or None), concurrency, storage_options."""


class Processor:
    def __init__(
        self,
        settings: ServiceSettings,
        *,
        clients: KafkaClients | None = None,
        deleter_factory: DeleterFactory = Deleter,
        metrics: PrometheusMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics or PrometheusMetrics()  # served on --metrics-port (observe.py)
        self.last_poll = time.monotonic()  # the poll loop went round (/healthz)
        self.metrics_url: str | None = None  # where --metrics-port serves, once run() started it
        self._clients = clients  # None: BrokerClients, built in run() (the embedded broker may need starting)
        self._deleter_factory = deleter_factory
        self.names = TopicNames(
            settings.input_topic,
            settings.checkpoints_topic,
            settings.validations_topic,
            settings.watermarks_topic,
            settings.state_topic,
            settings.dlq_topic,
        )
        self.fold_settings = settings.fold_settings()
        self.tasks: dict[PartitionId, PartitionTask] = {}
        self.ready = asyncio.Event()
        self.closed_stats = TaskStats()
        self.rejoins = 0  # times a fenced partition made this instance rejoin the group
        self.rebuilds = 0  # times a partition was restored again after a failed commit
        self._stopping = asyncio.Event()
        self._fatal: BaseException | None = None
        self._rebuilds: dict[PartitionId, list[float]] = {}
        self._assigned: set[PartitionId] = set()
        self._revocations = 0  # rebalances seen: a restore begun before the last one is stale (_activate)
        self._reopen: dict[PartitionId, tuple[int, float]] = {}  # restores to retry: (attempts, when)
        self._consumer: InputConsumer | None = None
        self._shared: SharedProducer | None = None
        self._completions: CompletionWriter | None = None
        self._deleter: DeletionService | None = None

    # -- public API ----------------------------------------------------------------

    def stop(self) -> None:
        """Ask `run()` to finish the current batch, commit, snapshot and return."""
        self._stopping.set()

    @property
    def assignment(self) -> list[PartitionId]:
        return sorted(self.tasks)

    def stats(self) -> TaskStats:
        total = TaskStats(**asdict(self.closed_stats))
        for task in self.tasks.values():
            for name, value in asdict(task.stats).items():
                setattr(total, name, getattr(total, name) + value)
        return total

    @property
    def assigned(self) -> frozenset[PartitionId]:
        """Partitions the group assigned to this instance (restored or not)."""
        return frozenset(self._assigned)

    @property
    def consumer(self) -> InputConsumer | None:
        return self._consumer

    @property
    def deleter(self) -> DeletionService | None:
        return self._deleter

    def readiness(self) -> tuple[bool, str]:
        """Ready (/readyz) once every assigned partition is restored and its fold reached the group's
        committed offset, i.e. holds exactly the durable state; why not, otherwise."""
        if self._stopping.is_set():
            return False, "stopping"
        if not self.ready.is_set():
            return False, "waiting for the first partition assignment"
        waiting = sorted(p for p in self._assigned if not ((t := self.tasks.get(p)) and t.caught_up and t.usable))
        if waiting:
            return False, f"not restored and caught up yet: {', '.join(map(str, waiting))}"
        return True, f"ready: {len(self._assigned)} partition(s) restored and caught up"

    async def run(self) -> None:
        """Run until `stop()`; raises a CkptlogError when a partition cannot be restored or served."""
        async with observed(self) as server:  # /metrics, /healthz, /readyz on --metrics-port (off by default)
            self.metrics_url = server.url if server is not None else None
            await self._run()

    async def _run(self) -> None:
        clients = self._clients = self._clients or await self._broker_clients()
        await self._ensure_topics(clients)
        self._deleter = self._deleter_factory(
            outer_root=self.settings.storage_root,
            on_done=self._deletions_done,
            on_refused=self._deletions_refused,
            recheck=self._still_owed,
            concurrency=self.settings.deletion_concurrency,
            storage_options=self.settings.checkpoint_storage_options,
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
        log.info("event=stopping reason=stop_requested")

    def _task_for(self, pid: PartitionId, records: Sequence[InputRecord]) -> PartitionTask | None:
        task = self.tasks.get(pid)
        if task is None:  # revoked while the poll was returning: the next owner restores and re-reads them
            log.warning(
                "event=records_without_task partition=%s first=%d count=%d", pid, records[0].offset, len(records)
            )
        return task

    async def _housekeeping(self, consumer: InputConsumer) -> None:
        now = time.monotonic()
        due = [pid for pid, (_, at) in self._reopen.items() if at <= now]
        if due:
            await self._open_all([pid for pid in due if pid in self._assigned and pid not in self.tasks])
        for pid, task in list(self.tasks.items()):
            if isinstance(task.broken, OffsetOutOfRange):
                raise task.broken
            if task.broken is not None:
                await self._recover(consumer, pid, task)
                return
            await task.tick(consumer.position)

    async def _recover(self, consumer: InputConsumer, pid: PartitionId, task: PartitionTask) -> None:
        history = [t for t in self._rebuilds.get(pid, []) if time.monotonic() - t < REBUILD_WINDOW_S]
        history.append(time.monotonic())
        self._rebuilds[pid] = history
        if len(history) > MAX_REBUILDS:
            raise TooManyRebuilds(
                f"{pid} failed {len(history)} times within {REBUILD_WINDOW_S:.0f}s (last: "
                f"{task.broken}); stopping — check the broker and the logs above"
            )
        if isinstance(task.broken, FencedError):
            log.warning("event=fenced partition=%s action=rejoin_group", pid)
            self.rejoins += 1
            await self._close_all(graceful=True)
            consumer.rejoin()
            return
        log.warning("event=rebuild partition=%s reason=%r", pid, task.broken)
        self.rebuilds += 1
        await self._close(pid, graceful=False)
        await self._open_all([pid])

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    # -- rebalance listener --------------------------------------------------------

    async def partitions_revoked(self, partitions: list[PartitionId]) -> None:
        self._revocations += 1
        self._assigned.difference_update(partitions)
        for pid in partitions:
            self._reopen.pop(pid, None)
        owned = [p for p in partitions if p in self.tasks]
        log.info("event=partitions_revoked partitions=%s", ",".join(map(str, owned)) or "-")
        await asyncio.gather(*(self._close(pid, graceful=True) for pid in owned))

    async def partitions_assigned(self, partitions: list[PartitionId]) -> None:
        log.info("event=partitions_assigned partitions=%s", ",".join(map(str, partitions)) or "-")
        if not partitions:
            log.warning(idle_message(self.settings))
        self._assigned.update(partitions)
        await self._open_all([p for p in partitions if p not in self.tasks])
        self.ready.set()

    async def _open_all(self, pids: Sequence[PartitionId]) -> None:
        began = self._revocations
        results = await asyncio.gather(*(self._open(pid) for pid in pids), return_exceptions=True)
        for pid, result in zip(pids, results, strict=True):
            if began != self._revocations:  # overtaken: the assignment since restores pid on its own, and
                await self._drop(pid, result)  # its retry (`_reopen`) or failure must not be touched by this
            elif isinstance(result, BaseException) and _transient(result):
                self._retry_open(pid, result)
            elif isinstance(result, BaseException):
                if not isinstance(result, CkptlogError):
                    log.exception("event=open_failed partition=%s", pid, exc_info=result)
                    result = ServiceError(f"{pid}: unexpected error while restoring: {result!r}; see the log")
                self._fatal = self._fatal or result
                self._stopping.set()
            else:
                self._reopen.pop(pid, None)
                await self._activate(pid, result, began)

    async def _drop(
        self, pid: PartitionId, result: PartitionTask | BaseException, reason: str = "a rebalance overtook the restore"
    ) -> None:
        """A restore whose outcome, success or failure, is void (see `_activate`)."""
        log.info("event=restore_dropped partition=%s reason=%s", pid, reason)
        self.metrics.restore_dropped()
        if isinstance(result, PartitionTask):
            await result.close(graceful=False)

    def _retry_open(self, pid: PartitionId, error: BaseException) -> None:
        """A transient failure to restore one partition: retry it with backoff while the others go on
        (issue 13: it used to stop the whole processor). The partition stays paused meanwhile."""
        attempts = self._reopen.get(pid, (0, 0.0))[0] + 1
        delay = min(REOPEN_FIRST_S * 2 ** (attempts - 1), REOPEN_MAX_S)
        self._reopen[pid] = (attempts, time.monotonic() + delay)
        self.metrics.restore_failed()
        log.warning(
            "event=restore_failed partition=%s attempt=%d retry_in_s=%.1f error=%s; the other partitions go on",
            pid,
            attempts,
            delay,
            error,
        )

    async def _open(self, pid: PartitionId) -> PartitionTask:
        assert self._consumer is not None and self._deleter is not None
        started = time.monotonic()
        self._consumer.pause([pid])  # nothing is fetched for pid until its task exists and has seeked
        publisher = self._publisher(pid)
        await publisher.start()  # exactly_once: init_transactions fences the previous owner first
        crash_point("restore.after_fence")
        try:
            store = SnapshotStore(
                self.settings.snapshots,
                pid.topic,
                pid.partition,
                self.settings.keep_snapshots,
                self.settings.snapshot_storage_options,
            )
            restored = await restore(pid, self._consumer, store, self.fold_settings, self.settings.allow_data_loss)
        except BaseException:
            await publisher.close()
            raise
        folder = BatchFolder(restored.fold, RecordFactory(self.names, pid))
        snapshots = SnapshotScheduler(
            pid,
            store,
            self.settings.snapshot_every,
            self.settings.snapshot_interval_s,
            restored.snapshot_offset,
            metrics=self.metrics,
        )
        task = PartitionTask(
            pid,
            restored,
            publisher,
            folder,
            snapshots,
            self._deleter,
            self.settings.checkpoint_storage_options,
            self._check_gap,
            self.metrics,
            started,
            self._consumer.seek,
        )
        self.metrics.restored(time.monotonic() - started)
        if restored.start >= restored.publish_from:
            task.catch_up()
        return task

    async def _activate(self, pid: PartitionId, task: PartitionTask, began: int) -> None:
        """Register the task, then seek and resume: records of pid only ever reach its own task.

        Only a restore begun in the current assignment (`began`: the rebalances seen when it
        started), and only once. A restore that a rebalance overtook — a rebuild (`_recover`)
        racing it — is dropped: finishing between the revocation and the next assignment, its seek
        would land on the outgoing assignment, the next one starts from the group's committed
        offset, and the task, left registered, would fold on from there over the records between
        its snapshot and that offset (they would be missing from its state); finishing later, it
        read offsets another owner may have moved since. The assignment restores pid again. A
        second restore of a partition that already has a task (both racing the same assignment) is
        dropped too: the first owns the position."""
        assert self._consumer is not None
        if began != self._revocations or pid not in self._assigned:
            await self._drop(pid, task)
            return
        if pid in self.tasks:
            await self._drop(pid, task, "restored twice")
            return
        self.tasks[pid] = task
        crash_point("restore.before_seek")
        self._consumer.seek(pid, task.next_offset)
        self._consumer.resume([pid])

    async def _check_gap(self, pid: PartitionId, expected: int, received: int) -> None:
        """A jump in offsets is normal (transaction markers, aborted records) unless retention deleted
        records this processor never read: then stop, or with --allow-data-loss log and go on."""
        assert self._consumer is not None
        log_start = await self._consumer.log_start(pid)
        if log_start <= expected:
            return
        message = (
            f"{pid}: offsets {expected}..{log_start - 1} were deleted by retention before this processor "
            f"read them (it expected {expected}, the log now starts at {log_start}); their events are not "
            "in the state. Increase the input topic's retention, or restart with --allow-data-loss to "
            "continue without them"
        )
        if not self.settings.allow_data_loss:
            raise OffsetOutOfRange(message)
        log.error(
            "event=DATA_LOSS partition=%s expected=%d log_start=%d received=%d", pid, expected, log_start, received
        )

    def _publisher(self, pid: PartitionId) -> Publisher:
        assert self._clients is not None and self._consumer is not None
        if self.settings.guarantee == "exactly_once":
            return ExactlyOncePublisher(self._clients.transactional_producer(pid))
        assert self._shared is not None
        return AtLeastOncePublisher(self._shared, self._consumer)

    async def _close(self, pid: PartitionId, graceful: bool) -> None:
        task = self.tasks.pop(pid, None)
        if task is None:
            return
        try:
            await task.close(graceful)
        except CkptlogError as exc:
            log.error("event=close_failed partition=%s error=%s", pid, exc)
        for name, value in asdict(task.stats).items():
            setattr(self.closed_stats, name, getattr(self.closed_stats, name) + value)

    async def _close_all(self, graceful: bool) -> None:
        await asyncio.gather(
            *(self._close(pid, graceful and self.tasks[pid].broken is None) for pid in list(self.tasks))
        )

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
        if self._deleter is not None and self._fatal is None:
            # the in-flight commits hand their evictions over; delete them while the partitions are ours
            await asyncio.gather(*(task.wait_committed() for task in list(self.tasks.values())))
            await self._deleter.drain(timeout=1.0)
        await self._close_all(graceful=self._fatal is None)
        if self._deleter is not None:
            await self._deleter.close()
        if self._completions is not None:
            await self._completions.close()
        if self._consumer is not None:
            await self._consumer.stop()
        if self._shared is not None:
            await self._shared.stop()
        log.info("event=stopped %s", " ".join(f"{k}={v}" for k, v in asdict(self.stats()).items()))
