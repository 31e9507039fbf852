"""Building a partition's task: the restore step of its lifecycle (ckptlog/processor/service/lifecycle.py).

`TaskFactory.open(partition)` pauses the partition's fetches, starts its publisher (under
exactly_once that fences the previous owner before anything is read), restores its state from
the newest snapshot plus the plan of ckptlog/processor/service/restore.py, and builds the task with every
part it works with. The partition stays RESTORING: whether the restore takes effect is the
processor's to decide (`Partitions.current`), and only once the consumer has been placed at the
task's offset does the partition become REPLAYING (`PartitionDriver._activate`). A task visible any
sooner would see the consumer still at the group's committed offset, take that for the end of
its replay, and go live on a state that never folded the records before it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ckptlog.kafka.records import PartitionId
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.service.lifecycle import Partition
from ckptlog.processor.service.metrics import ServiceMetrics
from ckptlog.processor.service.partition import PartitionTask, TaskParts
from ckptlog.processor.service.ports import ClaimService, DeletionService, InputConsumer, KafkaClients, SharedProducer
from ckptlog.processor.service.publish import AtLeastOncePublisher, ExactlyOncePublisher, Publisher
from ckptlog.processor.service.records import RecordFactory, TopicNames
from ckptlog.processor.service.restore import restore
from ckptlog.processor.service.settings import ServiceSettings
from ckptlog.processor.service.snapshotting import SnapshotScheduler
from ckptlog.processor.storage.snapshots import SnapshotStore


@dataclass(frozen=True, slots=True)
class TaskFactory:
    """What every partition task of one processor shares."""

    settings: ServiceSettings
    names: TopicNames
    clients: KafkaClients
    consumer: InputConsumer
    deleter: DeletionService
    claims: ClaimService
    shared: SharedProducer | None
    metrics: ServiceMetrics

    async def open(self, partition: Partition) -> PartitionTask:
        """Restore `partition` and build its task (see the module docstring)."""
        pid, settings, started = partition.pid, self.settings, time.monotonic()
        self.consumer.pause([pid])  # nothing is fetched for pid until its task exists and has seeked
        publisher = self.publisher(pid)
        await publisher.start()  # exactly_once: init_transactions fences the previous owner first
        crash_point("restore.after_fence")
        try:
            store = SnapshotStore(
                settings.snapshots, pid.topic, pid.partition, settings.keep_snapshots, settings.snapshot_storage_options
            )
            restored = await restore(pid, self.consumer, store, settings.fold_settings(), settings.allow_data_loss)
        except BaseException:
            await publisher.close()
            raise
        snapshots = SnapshotScheduler(
            pid,
            store,
            settings.snapshot_every,
            settings.snapshot_interval_s,
            restored.snapshot_offset,
            metrics=self.metrics,
            chain=restored.chain,
            max_deltas=settings.snapshot_deltas,
        )
        parts = TaskParts(
            publisher,
            RecordFactory(self.names, pid),
            snapshots,
            self.deleter,
            self.claims,
            self.consumer,
            settings.checkpoint_storage_options,
            self.metrics,
            settings.allow_data_loss,
            started,
        )
        task = PartitionTask(partition, restored, parts)
        self.metrics.restored(time.monotonic() - started)
        return task  # the driver activates it (partition_driver.py `_activate`): seek, then REPLAYING

    def publisher(self, pid: PartitionId) -> Publisher:
        if self.settings.guarantee == "exactly_once":
            return ExactlyOncePublisher(self.clients.transactional_producer(pid))
        assert self.shared is not None
        return AtLeastOncePublisher(self.shared, self.consumer)
