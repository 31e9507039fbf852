"""The group consumer the service reads its input partitions with.

Manual commits and `read_committed`; assignment changes are forwarded to an
`AssignmentListener` (awaited, as aiokafka's rebalance listener is), and every other
call speaks `PartitionId`, so the service never imports aiokafka.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Protocol

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import InvalidSessionTimeoutError
from aiokafka.structs import OffsetAndMetadata

from ckptlog.errors import ConfigError
from ckptlog.kafka.connection import KafkaConnection, start_client
from ckptlog.kafka.errors import map_kafka_errors
from ckptlog.kafka.records import InputRecord, PartitionId

log = logging.getLogger(__name__)


class AssignmentListener(Protocol):
    async def partitions_revoked(self, partitions: list[PartitionId]) -> None: ...

    async def partitions_assigned(self, partitions: list[PartitionId]) -> None: ...


class _Bridge(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, listener: AssignmentListener) -> None:
        self._listener = listener

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        await self._listener.partitions_revoked(sorted(PartitionId(*tp) for tp in revoked))

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        await self._listener.partitions_assigned(sorted(PartitionId(*tp) for tp in assigned))


_RETRY = "check that the broker is up and the partition has a leader, then retry"


def _tp(pid: PartitionId) -> TopicPartition:
    return TopicPartition(pid.topic, pid.partition)


class GroupConsumer:
    def __init__(
        self,
        conn: KafkaConnection,
        group_id: str,
        topic: str,
        listener: AssignmentListener,
        *,
        max_records: int = 20_000,
        session_timeout_ms: int = 10_000,
        fetch_max_wait_ms: int = 100,
        group_instance_id: str | None = None,
    ) -> None:
        self._conn, self.group_id, self.topic = conn, group_id, topic
        self._bridge = _Bridge(listener)
        self._max_records, self._session_timeout_ms = max_records, session_timeout_ms
        self._consumer = AIOKafkaConsumer(
            **conn.client_kwargs(),
            group_id=group_id,
            group_instance_id=group_instance_id,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=max(60_000, session_timeout_ms),  # revocation snapshots, restores take time
            heartbeat_interval_ms=max(100, session_timeout_ms // 5),
            fetch_max_wait_ms=fetch_max_wait_ms,
            max_partition_fetch_bytes=4 * 1024 * 1024,
        )

    async def start(self) -> None:
        await start_client(self._consumer, self._conn, f"consumer group {self.group_id}")
        self.subscribe()

    def subscribe(self) -> None:
        self._consumer.subscribe([self.topic], listener=self._bridge)

    def rejoin(self) -> None:
        """Leave and re-enter the group (after being fenced): assignment is renegotiated."""
        self._consumer.unsubscribe()
        self.subscribe()

    async def poll(self, timeout_ms: int) -> dict[PartitionId, Sequence[InputRecord]]:
        with map_kafka_errors(
            f"consuming {self.topic} in group {self.group_id} failed", "check the broker and the group's ACLs"
        ):
            try:
                batches = await self._consumer.getmany(timeout_ms=timeout_ms, max_records=self._max_records)
            except InvalidSessionTimeoutError:
                raise ConfigError(
                    f"the broker refused group {self.group_id}'s session timeout of {self._session_timeout_ms} ms: "
                    "it lies outside the broker's group.min.session.timeout.ms..group.max.session.timeout.ms; "
                    "set --session-timeout-ms (CKPTLOG_SESSION_TIMEOUT_MS) within them"
                ) from None
        return {PartitionId(*tp): records for tp, records in batches.items()}

    def assignment(self) -> set[PartitionId]:
        return {PartitionId(*tp) for tp in self._consumer.assignment()}

    def seek(self, pid: PartitionId, offset: int) -> None:
        self._consumer.seek(_tp(pid), offset)

    def pause(self, pids: Sequence[PartitionId]) -> None:
        self._consumer.pause(*[_tp(p) for p in pids])

    def resume(self, pids: Sequence[PartitionId]) -> None:
        self._consumer.resume(*[_tp(p) for p in pids])

    async def position(self, pid: PartitionId) -> int:
        with map_kafka_errors(f"{pid}: reading the position of group {self.group_id} failed", _RETRY):
            return int(await self._consumer.position(_tp(pid)))

    async def committed(self, pid: PartitionId) -> int | None:
        """The group's committed offset of `pid`, None when it has none."""
        with map_kafka_errors(
            f"{pid}: reading the committed offset of group {self.group_id} failed",
            "retry once the group coordinator is available",
        ):
            offset = await self._consumer.committed(_tp(pid))
        return None if offset is None or offset < 0 else int(offset)

    async def log_start(self, pid: PartitionId) -> int:
        with map_kafka_errors(f"{pid}: reading the log start offset failed", _RETRY):
            return int((await self._consumer.beginning_offsets([_tp(pid)]))[_tp(pid)])

    async def log_end(self, pid: PartitionId) -> int:
        """The last stable offset (read_committed): the end a caught-up reader reaches."""
        with map_kafka_errors(f"{pid}: reading the log end offset failed", _RETRY):
            return int((await self._consumer.end_offsets([_tp(pid)]))[_tp(pid)])

    async def commit(self, offsets: dict[PartitionId, int]) -> None:
        """Commit next offsets (at_least_once mode; exactly_once commits inside the transaction)."""
        names = ", ".join(f"{p}@{o}" for p, o in offsets.items())
        with map_kafka_errors(
            f"committing {names} for group {self.group_id} failed",
            "the records will be re-processed (at_least_once) after the next rebalance",
        ):
            await self._consumer.commit({_tp(p): OffsetAndMetadata(o, "") for p, o in offsets.items()})

    async def stop(self) -> None:
        await self._consumer.stop()
