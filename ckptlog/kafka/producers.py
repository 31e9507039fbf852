"""Producers for the two delivery guarantees.

`TransactionalProducer`: one per input partition (pre-KIP-447 zombie fencing; aiokafka's
`send_offsets_to_transaction` takes only a group id). Its transactional id is stable per
(prefix, topic, partition), so a new owner's `init_transactions` (run by `start`) bumps the
epoch and any older owner's next transactional request fails with `FencedError`.

`IdempotentProducer`: one per process for at_least_once; the service commits the consumer
offsets itself once `publish` has returned (every record acknowledged).

Both fill aiokafka batches through `Batcher`: straight into the compiled record builder when the
connection may use aiokafka's private attributes (ckptlog/kafka/fence.py: the aiokafka version
that code was written for), else through `BatchBuilder.append`, aiokafka's public API.
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

from ckptlog.kafka.connection import KafkaConnection, start_client
from ckptlog.kafka.errors import FencedError, KafkaIOError, best_effort, map_kafka_errors
from ckptlog.kafka.fence import use_internals
from ckptlog.kafka.records import OutRecord, PartitionId

log = logging.getLogger(__name__)

_BATCH_BYTES = 512 * 1024
_NO_HEADERS: list[tuple[str, bytes]] = []  # shared, never mutated (aiokafka only reads it)
PAGE_SEPARATOR = b"\x1f"  # ckptlog.events.view.PAGE_KEY_SEPARATOR: a key holding it is partitioned by what precedes it
_FENCED_STEP = "another instance now owns this partition; this instance drops it and rejoins the group"
MAX_RECORD_BYTES = 16 * 1024 * 1024
"""Largest record the processor produces (a run VIEW with many checkpoints can be large); the
state topic is created with max.message.bytes to match."""


def retrieve_failures(producer: AIOKafkaProducer, internals: bool | None = None) -> None:
    """Mark exceptions left on aiokafka's internal futures as retrieved.

    After a fatal error (fenced) aiokafka sets the exception on every queued batch's drain
    waiter and on the transaction waiter, which nobody awaits; left alone they are logged as
    "Future exception was never retrieved" from a garbage-collector finalizer at a random later
    moment. Best effort: these are aiokafka internals, so only on the version they were read
    against (fence.py; `internals` None: ask it) and any change there is ignored; elsewhere that log
    line may appear, and nothing else changes."""
    if not (use_internals() if internals is None else internals):
        return
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


Append = Callable[[int, int, bytes | None, bytes | None, list[Any]], object]
"""(offset in the batch, CreateTime ms, key, value, headers) -> None when the batch is full."""


class _Open:
    """One partition's batch being filled (the fast path, fence.py): aiokafka's BatchBuilder and the
    `append` of the compiled record builder inside it, called directly (positional arguments, no
    per-record keyword parsing, wrapper frame and clock read: a third of the per-record cost), with
    the count kept here and handed back to the builder by `seal`."""

    __slots__ = ("append", "builder", "count")

    def __init__(self, builder: Any) -> None:
        self.builder, self.count = builder, 0
        self.append: Append = builder._builder.append

    def seal(self) -> None:
        """Set the record count (the idempotent producer's sequence numbers advance by it) where
        BatchBuilder.append would have kept it."""
        self.builder._relative_offset = self.count


class _PublicOpen:
    """One partition's batch being filled through aiokafka's public `BatchBuilder.append`, which
    counts its records itself."""

    __slots__ = ("builder", "count")

    def __init__(self, builder: Any) -> None:
        self.builder, self.count = builder, 0

    def append(self, offset: int, stamp: int, key: bytes | None, value: bytes | None, headers: list[Any]) -> object:
        return self.builder.append(timestamp=stamp, key=key, value=value, headers=headers)

    def seal(self) -> None:
        pass


class Batcher:
    """Appends records straight into per-partition batches (no coroutine and future per record).

    Keys are partitioned with Kafka's default murmur2 partitioner, as Java and aiokafka do,
    with a cache (run ids repeat); a record with `partition` set goes there. A VIEW page's key
    (`{run}\x1fpage\x1f…`) is partitioned by its run id, so pages share their head's partition. Records of one
    `send_all` share one CreateTime (aiokafka would read the clock per record). `internals`: fill the
    batches through aiokafka's private builder, else through its public API (None: as fence.py says).
    """

    _CACHE_LIMIT = 100_000

    def __init__(self, producer: AIOKafkaProducer, internals: bool | None = None) -> None:
        self._producer = producer
        self.internals = use_internals() if internals is None else internals
        self._open: type[_Open | _PublicOpen] = _Open if self.internals else _PublicOpen
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
        cache, batches, new = self._cache, dict[tuple[str, int], _Open | _PublicOpen](), self._open
        futures: list[asyncio.Future[Any]] = []
        stamp = int(time.time() * 1000)
        for topic, key, value, headers, partition in records:  # hot: ~3 records per input event
            if partition is None:
                partition = cache.get((topic, key))  # a None key is never cached: spread at random
                if partition is None:
                    partition = await self._partition(topic, key)
            batch = batches.get((topic, partition))
            if batch is None:
                batch = batches[(topic, partition)] = new(self._producer.create_batch())
            listed = list(headers) if headers else _NO_HEADERS
            if batch.append(batch.count, stamp, key, value, listed) is None:  # full
                futures.append(await self._send(batch, topic, partition))
                batch = batches[(topic, partition)] = new(self._producer.create_batch())
                batch.append(0, stamp, key, value, listed)  # an empty batch takes any record
            batch.count += 1
        for (topic, partition), batch in batches.items():
            futures.append(await self._send(batch, topic, partition))
        if futures:  # wait for all of them (no "exception never retrieved"), then raise the first failure
            results = await asyncio.gather(*futures, return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    raise result

    async def _send(self, batch: _Open | _PublicOpen, topic: str, partition: int) -> asyncio.Future[Any]:
        """Hand a filled batch to the producer, its record count set (`seal`)."""
        batch.seal()
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
        self._batcher = Batcher(self._producer, conn.internals)
        self._started = False
        self._in_transaction = False  # begun and neither committed nor aborted: what an abort is for

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
                self._in_transaction = True
                await self._batcher.send_all(records)
                if offsets:
                    await producer.send_offsets_to_transaction(
                        {TopicPartition(*p): OffsetAndMetadata(o, "") for p, o in offsets.items()}, self.group_id
                    )
                await producer.commit_transaction()
                self._in_transaction = False
        except FencedError:
            raise
        except KafkaIOError:
            await self._abort_quietly()
            raise

    async def _abort_quietly(self) -> None:
        # the producer is closed and rebuilt by the caller anyway
        with best_effort(log, "abort_failed", f"{self.pid}: aborting a transaction of {self.transactional_id} failed"):
            if self._in_transaction:
                self._in_transaction = False
                await self._producer.abort_transaction()

    async def stop(self) -> None:
        internals = self._batcher.internals
        retrieve_failures(self._producer, internals)
        what = f"stopping transactional producer {self.transactional_id} failed"
        with best_effort(log, "producer_stop_failed", what):
            await self._producer.stop()
        retrieve_failures(self._producer, internals)


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
        self._batcher = Batcher(self._producer, conn.internals)

    async def start(self) -> None:
        await start_client(self._producer, self._conn, "the idempotent producer")

    async def publish(self, records: Sequence[OutRecord]) -> None:
        with map_kafka_errors(
            f"publishing {len(records)} records to {self._conn.bootstrap_servers} failed",
            "the batch will be re-processed (same output ids)",
        ):
            await self._batcher.send_all(records)

    async def stop(self) -> None:
        internals = self._batcher.internals
        retrieve_failures(self._producer, internals)
        with map_kafka_errors(
            "stopping the idempotent producer failed", "records it had not sent are re-processed after a restart"
        ):
            await self._producer.stop()
        retrieve_failures(self._producer, internals)


async def produce(conn: KafkaConnection, records: Sequence[OutRecord]) -> None:
    """Produce records with a throw-away idempotent producer (tools, demos, tests)."""
    producer = IdempotentProducer(conn)
    await producer.start()
    try:
        await producer.publish(records)
    finally:
        await producer.stop()
