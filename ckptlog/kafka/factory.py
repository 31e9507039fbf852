"""The processor's real Kafka clients, built on demand over one connection (`KafkaClients`).

`ckptlog.processor.service.Processor` takes a factory so that the service can be driven without a
broker (the unit tests pass in-memory fakes); this is the one it uses by default.
"""

from __future__ import annotations

from collections.abc import Sequence

from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.consumer import AssignmentListener, GroupConsumer
from ckptlog.kafka.producers import IdempotentProducer, TransactionalProducer
from ckptlog.kafka.records import PartitionId
from ckptlog.kafka.topics import TopicSpec, ensure_topics


class BrokerClients:
    """Clients of one consumer group: its group consumer, one transactional producer per input
    partition (transactional id `{prefix}-{topic}-{partition}`) and a shared idempotent producer."""

    def __init__(self, conn: KafkaConnection, group_id: str, transactional_id_prefix: str) -> None:
        self.conn, self.group_id, self.transactional_id_prefix = conn, group_id, transactional_id_prefix

    @property
    def servers(self) -> str:
        return self.conn.bootstrap_servers

    async def ensure_topics(
        self, specs: Sequence[TopicSpec], default_partitions: int, replication_factor: int | None
    ) -> dict[str, int]:
        return await ensure_topics(self.conn, specs, default_partitions, replication_factor)

    def consumer(
        self,
        topic: str,
        listener: AssignmentListener,
        *,
        max_records: int,
        session_timeout_ms: int,
        group_instance_id: str | None,
    ) -> GroupConsumer:
        return GroupConsumer(
            self.conn,
            self.group_id,
            topic,
            listener,
            max_records=max_records,
            session_timeout_ms=session_timeout_ms,
            group_instance_id=group_instance_id,
        )

    def transactional_producer(self, pid: PartitionId) -> TransactionalProducer:
        return TransactionalProducer(self.conn, self.transactional_id_prefix, pid, self.group_id)

    def shared_producer(self) -> IdempotentProducer:
        return IdempotentProducer(self.conn)
