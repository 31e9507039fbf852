"""How a partition's batch becomes durable, per delivery guarantee.

exactly_once: the partition's own transactional producer commits outputs and the consumed
offset in one transaction. at_least_once: the shared idempotent producer publishes, every
record is acknowledged, then the consumer commits the offset (a crash in between repeats
outputs, with the same ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ckptlog.kafka.records import OutRecord, PartitionId
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.service.ports import InputConsumer, SharedProducer, TransactionalProducer


class Publisher(Protocol):
    async def start(self) -> None: ...

    async def commit(self, records: Sequence[OutRecord], offsets: dict[PartitionId, int]) -> None: ...

    async def close(self) -> None: ...


class ExactlyOncePublisher:
    def __init__(self, producer: TransactionalProducer) -> None:
        self._producer = producer

    async def start(self) -> None:
        await self._producer.start()

    async def commit(self, records: Sequence[OutRecord], offsets: dict[PartitionId, int]) -> None:
        await self._producer.commit(records, offsets)

    async def close(self) -> None:
        await self._producer.stop()


class AtLeastOncePublisher:
    def __init__(self, producer: SharedProducer, consumer: InputConsumer) -> None:
        self._producer, self._consumer = producer, consumer

    async def start(self) -> None:
        return None

    async def commit(self, records: Sequence[OutRecord], offsets: dict[PartitionId, int]) -> None:
        if records:
            await self._producer.publish(records)
            crash_point("commit.published_not_committed")
        if offsets:
            await self._consumer.commit(offsets)

    async def close(self) -> None:
        return None
