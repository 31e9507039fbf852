"""Producers for the two delivery guarantees.

`TransactionalProducer`: one per input partition (pre-KIP-447 zombie fencing; aiokafka's
`send_offsets_to_transaction` takes only a group id). Its transactional id is stable per
(prefix, topic, partition), so a new owner's `init_transactions` (run by `start`) bumps the
epoch and any older owner's next transactional request fails with `FencedError`.

`IdempotentProducer`: one per process for at_least_once; the service commits the consumer
offsets itself once `publish` has returned (every record acknowledged).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.structs import OffsetAndMetadata

from processor.kafka.connection import KafkaConnection, start_client
from processor.kafka.errors import FencedError, KafkaIOError, best_effort, map_kafka_errors
from processor.kafka.records import OutRecord, PartitionId

log = logging.getLogger(__name__)

_BATCH_BYTES = 512 * 1024
_NO_HEADERS: list[tuple[str, bytes]] = []  # shared, never mutated (aiokafka only reads it)
PAGE_SEPARATOR = b"\x1f"  # events.view.PAGE_KEY_SEPARATOR: a key holding it is partitioned by what precedes it
_FENCED_STEP = "another instance now owns this partition; this instance drops it and rejoins the group"
MAX_RECORD_BYTES = 16 * 1024 * 1024
"""Largest record the processor produces (a run VIEW with many checkpoints can be large); the
state topic is created with max.message.bytes to match."""


def retrieve_failures(producer: AIOKafkaProducer) -> None:
    """Mark exceptions left on aiokafka's internal futures as retrieved.

    After a fatal error (fenced) aiokafka sets the exception on every queued batch's drain
    waiter and on the transaction waiter, which nobody awaits; left alone they are logged as
    "Future exception was never retrieved" from a garbage-collector finalizer at a random later
    moment. Best effort: these are aiokafka internals, so any change there is ignored."""
    try:
        accumulator = producer._message_accumulator
        batches = [b for queue in accumulator._batches.values() for b in queue] + list(accumulator._pending_batches)
        futures = [f for b in batches for f in (b.future, b._drain_waiter)]
        if producer._txn_manager is not None:
            futures.append(producer._txn_manager._transaction_waiter)
    except AttributeError:
        return
    for future in futures:
        if future is not None and future.done() and not future.cancelled():
            future.exception()


def transactional_id(prefix: str, pid: PartitionId) -> str:
    """Stable per input partition: whoever owns `pid` next fences whoever owned it before."""
    return f"{prefix}-{pid.topic}-{pid.partition}"


class _Open:
    """One partition's batch being filled: aiokafka's BatchBuilder and the `append` of the compiled
    record builder inside it, called directly (positional arguments, no per-record keyword parsing,
    wrapper frame and clock read: a third of the per-record cost), with the count kept here."""

    __slots__ = ("append", "builder", "count")

    def __init__(self, builder: Any) -> None:
        self.builder, self.count = builder, 0
        self.append: Callable[[int, int, bytes | None, bytes | None, list[Any]], object] = builder._builder.append


class Batcher:
    """Appends records straight into per-partition batches (no coroutine and future per record).

    Keys are partitioned with Kafka's default murmur2 partitioner, as Java and aiokafka do,
    with a cache (run ids repeat); a record with `partition` set goes there. A VIEW page's key
    (`{run}\x1fpage\x1f…`) is partitioned by its run id, so pages share their head's partition. Records of one
    `send_all` share one CreateTime (aiokafka would read the clock per record).
    """

    _CACHE_LIMIT = 100_000

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self._producer = producer
        self._partitions: dict[str, list[int]] = {}
        self._cache: dict[tuple[str, bytes | None], int] = {}
        self._partitioner = DefaultPartitioner()

    async def _partition(self, topic: str, key: bytes | None) -> int:
        partitions = self._partitions.get(topic)
        if partitions is None:
            partitions = self._partitions[topic] = sorted(await self._producer.partitions_for(topic))
        if key is None:
            return int(self._partitioner(None, partitions, partitions))
        if len(self._cache) > self._CACHE_LIMIT:
            self._cache.clear()
        route = key.split(PAGE_SEPARATOR, 1)[0]  # a VIEW page goes where its run's head goes
        partition = self._cache[(topic, key)] = int(self._partitioner(route, partitions, partitions))
        return partition

    async def send_all(self, records: Sequence[OutRecord]) -> None:
        """Queue every record, then wait until each batch is acknowledged."""
        cache, batches = self._cache, dict[tuple[str, int], _Open]()
        futures: list[asyncio.Future[Any]] = []
        stamp = int(time.time() * 1000)
        for topic, key, value, headers, partition in records:  # hot: ~3 records per input event
            if partition is None:
                partition = cache.get((topic, key))  # a None key is never cached: spread at random
                if partition is None:
                    partition = await self._partition(topic, key)
            batch = batches.get((topic, partition))
            if batch is None:
                batch = batches[(topic, partition)] = _Open(self._producer.create_batch())
            listed = list(headers) if headers else _NO_HEADERS
            if batch.append(batch.count, stamp, key, value, listed) is None:  # full
                futures.append(await self._send(batch, topic, partition))
                batch = batches[(topic, partition)] = _Open(self._producer.create_batch())
                batch.append(0, stamp, key, value, listed)  # an empty batch takes any record
            batch.count += 1
        for (topic, partition), batch in batches.items():
            futures.append(await self._send(batch, topic, partition))
        if futures:  # wait for all of them (no "exception never retrieved"), then raise the first failure
            results = await asyncio.gather(*futures, return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    raise result

    async def _send(self, batch: _Open, topic: str, partition: int) -> asyncio.Future[Any]:
        """Hand a filled batch to the producer; its record count (the idempotent producer's sequence
        numbers advance by it) is set where BatchBuilder.append would have kept it."""
        batch.builder._relative_offset = batch.count
        future: asyncio.Future[Any] = await self._producer.send_batch(batch.builder, topic, partition=partition)
        return future


class TransactionalProducer:
    """Outputs and consumed offsets of one input partition, committed atomically."""

    def __init__(
        self, conn: KafkaConnection, prefix: str, pid: PartitionId, group_id: str, transaction_timeout_ms: int = 60_000
    ) -> None:
        self.pid, self.group_id, self._conn = pid, group_id, conn
        self.transactional_id = transactional_id(prefix, pid)
        kwargs = conn.client_kwargs()
        kwargs["client_id"] = f"{kwargs['client_id']}-{pid.topic}-{pid.partition}"
        self._producer = AIOKafkaProducer(
            **kwargs,
            transactional_id=self.transactional_id,
            transaction_timeout_ms=transaction_timeout_ms,
            max_batch_size=_BATCH_BYTES,
            linger_ms=0,
            max_request_size=MAX_RECORD_BYTES,
        )
        self._batcher = Batcher(self._producer)
        self._started = False

    async def start(self) -> None:
        """Connect and run init_transactions: fences every older producer with this id."""
        await start_client(
            self._producer,
            self._conn,
            f"transactional producer {self.transactional_id}",
            failure=f"{self.pid}: starting transactional producer {self.transactional_id} failed",
            next_step="check that the broker supports transactions",
            fenced=_FENCED_STEP,
        )
        self._started = True

    async def commit(self, records: Sequence[OutRecord], offsets: dict[PartitionId, int]) -> None:
        """One transaction: every record plus the group's next offsets, all or nothing."""
        producer = self._producer
        try:
            with map_kafka_errors(
                f"{self.pid}: transaction of {self.transactional_id} with {len(records)} records failed",
                "the batch is aborted and will be re-processed",
                fenced=_FENCED_STEP,
            ):
                await producer.begin_transaction()
                await self._batcher.send_all(records)
                if offsets:
                    await producer.send_offsets_to_transaction(
                        {TopicPartition(*p): OffsetAndMetadata(o, "") for p, o in offsets.items()}, self.group_id
                    )
                await producer.commit_transaction()
        except FencedError:
            raise
        except KafkaIOError:
            await self._abort_quietly()
            raise

    async def _abort_quietly(self) -> None:
        # the producer is closed and rebuilt by the caller anyway
        with best_effort(log, "abort_failed", f"{self.pid}: aborting a transaction of {self.transactional_id} failed"):
            if self._producer._txn_manager is not None and self._producer._txn_manager.is_in_transaction():
                await self._producer.abort_transaction()

    async def stop(self) -> None:
        retrieve_failures(self._producer)
        what = f"stopping transactional producer {self.transactional_id} failed"
        with best_effort(log, "producer_stop_failed", what):
            await self._producer.stop()
        retrieve_failures(self._producer)


class IdempotentProducer:
    """at_least_once: acks=all, idempotent, shared by every partition of the process."""

    def __init__(self, conn: KafkaConnection) -> None:
        self._conn = conn
        self._producer = AIOKafkaProducer(
            **conn.client_kwargs(),
            enable_idempotence=True,
            max_batch_size=_BATCH_BYTES,
            linger_ms=0,
            max_request_size=MAX_RECORD_BYTES,
        )
        self._batcher = Batcher(self._producer)

    async def start(self) -> None:
        await start_client(self._producer, self._conn, "the idempotent producer")

    async def publish(self, records: Sequence[OutRecord]) -> None:
        with map_kafka_errors(
            f"publishing {len(records)} records to {self._conn.bootstrap_servers} failed",
            "the batch will be re-processed (same output ids)",
        ):
            await self._batcher.send_all(records)

    async def stop(self) -> None:
        retrieve_failures(self._producer)
        with map_kafka_errors(
            "stopping the idempotent producer failed", "records it had not sent are re-processed after a restart"
        ):
            await self._producer.stop()
        retrieve_failures(self._producer)


async def produce(conn: KafkaConnection, records: Sequence[OutRecord]) -> None:
    """Produce records with a throw-away idempotent producer (tools, demos, tests)."""
    producer = IdempotentProducer(conn)
    await producer.start()
    try:
        await producer.publish(records)
    finally:
        await producer.stop()
