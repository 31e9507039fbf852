"""The thin aiokafka layer under the client library (`ckptlog.Reporter`, `Evaluator`, `AsyncReader`).

Only this package may import aiokafka, so the clients talk to Kafka through three small
pieces: an idempotent producer that returns where each record landed, a tail that follows
every partition of a topic from its beginning (read_committed) and never stops at the end,
and topic deletion for the demo's throw-away topics. The evaluator's consumer group is
`ckptlog.kafka.consumer.GroupConsumer`, shared with the processor. What reads aiokafka's
private attributes does so only where the connection allows it (ckptlog/kafka/fence.py), with
a public-API way otherwise.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from ckptlog.kafka.connection import CHECK_BROKER, KafkaConnection, start_client
from ckptlog.kafka.errors import KafkaIOError, best_effort, map_kafka_errors
from ckptlog.kafka.reader import Record
from ckptlog.kafka.topics import _Admin, admin_client, partition_counts

log = logging.getLogger(__name__)
RETRY_SAFELY = "the call can be retried safely (event ids are deterministic)"
STALLED_CLOSE_S = 2.0
"""How long closing a producer whose send timed out may take (its sockets, not the broker)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """Where an acknowledged record landed."""

    topic: str
    partition: int
    offset: int


class EventProducer:
    """Idempotent (enable_idempotence=True implies acks=all): a retried send is never duplicated
    by the broker, and an acknowledged record is on every in-sync replica."""

    def __init__(self, conn: KafkaConnection) -> None:
        self._conn, self._stalled = conn, False
        self._producer = AIOKafkaProducer(
            **conn.client_kwargs(),
            enable_idempotence=True,
            acks="all",
            linger_ms=0,
            request_timeout_ms=int(conn.delivery_timeout_s * 1000),
        )

    async def start(self) -> None:
        await start_client(self._producer, self._conn, "an idempotent producer")

    @property
    def guarantees(self) -> tuple[int | None, int]:
        """(producer id the broker assigned — None until started or without idempotence, acks),
        for logs and tests that the retry-safety settings are really on. Read from aiokafka's
        internals where fence.py allows; else (None, the acks this class configures: -1, "all")."""
        if not self._conn.internals:
            return None, -1
        txn = self._producer._txn_manager
        pid = txn.producer_id if txn is not None and txn.producer_id >= 0 else None
        return pid, int(self._producer._sender._acks)

    async def has_topic(self, topic: str) -> bool:
        """Whether `topic` exists now (a send to a missing topic would block for the request timeout)."""
        with map_kafka_errors(f"reading metadata from {self._conn.bootstrap_servers} failed", CHECK_BROKER):
            cluster = await self._producer.client.fetch_all_metadata()
        return bool(cluster.partitions_for_topic(topic))

    async def send(self, topic: str, key: bytes, value: bytes) -> Delivery:
        """Send one record and wait for the broker's acknowledgement, up to the connection's
        `delivery_timeout_s`; then KafkaIOError naming the broker and the next step."""
        limit = self._conn.delivery_timeout_s
        try:
            async with asyncio.timeout(limit):
                with map_kafka_errors(f"sending to {topic} on {self._conn.bootstrap_servers} failed", RETRY_SAFELY):
                    meta = await (await self._producer.send(topic, value, key=key))
        except TimeoutError:
            self._stalled = True
            raise KafkaIOError(
                f"Kafka at {self._conn.bootstrap_servers} did not acknowledge a record for {topic} within "
                f"{limit:g} s (delivery_timeout_s): the broker is down or unreachable; check it (`ckptlog broker "
                f"status` for the local one) and {RETRY_SAFELY}, or raise CKPTLOG_DELIVERY_TIMEOUT_S to wait longer"
            ) from None
        except KafkaIOError:
            self._stalled = True
            raise
        return Delivery(meta.topic, meta.partition, meta.offset)

    async def stop(self) -> None:
        """Close; after a send that failed, the records still unacknowledged are dropped at once
        instead of waiting for the broker again (their callers already got KafkaIOError)."""
        if self._stalled:
            await self._abandon()
            return
        try:
            async with asyncio.timeout(self._conn.delivery_timeout_s):
                with best_effort(log, "producer_stop_failed", "stopping the idempotent event producer failed"):
                    await self._producer.stop()
        except TimeoutError:
            log.warning("event=producer_stop_timeout servers=%s", self._conn.bootstrap_servers)

    async def _abandon(self) -> None:
        """Stop the sender (it would retry those records until the broker is back), then the client's
        connections: aiokafka's own stop() would first wait for every record to be acknowledged.
        Without aiokafka's internals (fence.py), its stop(), given STALLED_CLOSE_S."""
        producer = self._producer
        if not self._conn.internals:
            with suppress(TimeoutError), best_effort(log, "producer_stop_failed", "closing the event producer failed"):
                await asyncio.wait_for(producer.stop(), STALLED_CLOSE_S)
            return
        task = producer._sender.sender_task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=STALLED_CLOSE_S)
        producer._closed = True
        with suppress(TimeoutError), best_effort(log, "producer_stop_failed", "closing the event producer failed"):
            await asyncio.wait_for(producer.client.close(), STALLED_CLOSE_S)


class TopicTail:
    """Follow every partition of `topic` from its beginning, forever (no consumer group).

    A topic that does not exist yet (the processor creates it on first start) is waited
    for: `fetch` returns nothing until it appears. `from_end`: start at the end the topic has when
    `start()` returns instead (a topic that appears later is read from its beginning: all of it is new).
    """

    def __init__(self, conn: KafkaConnection, topic: str, *, from_end: bool = False) -> None:
        self._conn, self.topic, self._from_end = conn, topic, from_end
        self._consumer = AIOKafkaConsumer(
            **conn.client_kwargs(),
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
        )
        self._tps: list[TopicPartition] = []
        self._assigning = asyncio.Lock()

    async def start(self) -> None:
        await start_client(self._consumer, self._conn, f"a reader of {self.topic}")
        async with self._assigning:
            await self._assign_now(at_end=self._from_end)

    async def _assign(self) -> bool:
        async with self._assigning:  # fetch and end_offsets may both get here first
            return bool(self._tps) or await self._assign_now()

    async def _assign_now(self, at_end: bool = False) -> bool:
        # A full metadata fetch: the consumer's own cache only tracks topics it already uses, so a
        # topic created after start() would never show up there.
        with self._reading("the metadata"):
            known = await self._partitions()
        if not known:
            return False
        self._tps = [TopicPartition(self.topic, p) for p in sorted(known)]
        self._consumer.assign(self._tps)
        if not at_end:
            with self._reading("the beginning offsets"):
                await self._consumer.seek_to_beginning(*self._tps)
            return True
        with self._reading("the end offsets"):
            await self._consumer.seek_to_end(*self._tps)
            for tp in self._tps:  # resolve the end now: a lazy seek would land past records written meanwhile
                await self._consumer.position(tp)
        return True

    async def _partitions(self) -> set[int] | None:
        """The topic's partitions from fresh metadata (None: no such topic yet). The consumer has
        no public call for that; with aiokafka's internals (fence.py) its client's metadata fetch,
        else an admin client's describe_topics: one more connection per look, the same answer."""
        if self._conn.internals:
            cluster = await self._consumer._client.fetch_all_metadata()
            found: set[int] | None = cluster.partitions_for_topic(self.topic)
            return found
        async with admin_client(self._conn) as admin:
            count = (await partition_counts(admin, [self.topic])).get(self.topic, 0)
        return set(range(count)) or None

    def _reading(self, what: str) -> AbstractContextManager[None]:
        return map_kafka_errors(
            f"reading {what} of {self.topic} from {self._conn.bootstrap_servers} failed",
            "check the broker; the next call retries",
        )

    async def fetch(self, timeout_ms: int = 200, max_records: int = 5000) -> list[Record]:
        """The next records (any partitions), or [] after `timeout_ms`."""
        if not await self._assign():
            await asyncio.sleep(timeout_ms / 1000)
            return []
        with self._reading("records"):
            batches = await self._consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
        return [
            Record(r.topic, r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
            for records in batches.values()
            for r in records
        ]

    async def positions(self) -> dict[int, int]:
        """The next offset `fetch` returns, per partition (past any transaction markers)."""
        with self._reading("the positions"):
            return {tp.partition: int(await self._consumer.position(tp)) for tp in self._tps}

    async def end_offsets(self) -> dict[int, int]:
        """Each partition's last stable offset now ({} while the topic does not exist)."""
        if not await self._assign():
            return {}
        with self._reading("the end offsets"):
            ends = await self._consumer.end_offsets(self._tps)
        return {tp.partition: int(offset) for tp, offset in ends.items()}

    async def stop(self) -> None:
        await self._consumer.stop()


class GroupOffsets:
    """A consumer group's committed offsets, read through one long-lived admin client (never joins
    the group): how a client tells whether the processor has committed past a record."""

    def __init__(self, conn: KafkaConnection, group_id: str) -> None:
        self._conn, self.group_id = conn, group_id
        self._admin = AIOKafkaAdminClient(**conn.client_kwargs())

    async def start(self) -> None:
        await start_client(_Admin(self._admin), self._conn, "the admin client")

    async def committed(self, topic: str, partition: int) -> int | None:
        """The group's committed offset of topic[partition] (the next offset it will read), None when it has none."""
        tp = TopicPartition(topic, partition)
        with map_kafka_errors(
            f"reading the committed offset of group {self.group_id} on {topic}[{partition}] failed",
            "check the broker and that this principal may describe the group",
        ):
            found = await self._admin.list_consumer_group_offsets(self.group_id, partitions=[tp])
        meta = found.get(tp)
        return int(meta.offset) if meta is not None and meta.offset >= 0 else None

    async def stop(self) -> None:
        with best_effort(log, "admin_stop_failed", "closing the admin client failed"):
            await self._admin.close()


async def delete_topics(conn: KafkaConnection, names: Sequence[str]) -> None:
    """Delete topics (best effort: a topic that is already gone is fine)."""
    async with admin_client(conn) as admin:
        with best_effort(log, "delete_topics_failed", f"deleting topics {', '.join(names)} failed"):
            await admin.delete_topics(list(names))
