"""Read a topic from its beginning to its current end, outside any consumer group.

Used by `ckptlog inspect` (compacted state topic: last value per key wins), `ckptlog
replay` (every input partition) and the tests. `read_committed`, so aborted transactions
never show, and "the end" is each partition's last stable offset taken at the start.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.partitioner import murmur2

from ckptlog.kafka.connection import KafkaConnection, start_client
from ckptlog.kafka.errors import KafkaIOError, TopicMissing, map_kafka_errors
from ckptlog.kafka.records import Header, PartitionId
from ckptlog.kafka.topics import admin_client, partition_counts


def partition_of(key: bytes, count: int) -> int:
    """The partition Kafka's default partitioner (murmur2, every ckptlog client's) puts `key` in."""
    return int(murmur2(key) & 0x7FFFFFFF) % count


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp: int | None = None  # milliseconds since the epoch, as the broker stored it


class TopicReader:
    """`async with TopicReader(conn, topic) as r: async for batch in r.batches(): ...`."""

    def __init__(
        self,
        conn: KafkaConnection,
        topic: str,
        partitions: Sequence[int] | None = None,
        start: dict[int, int] | None = None,
        stop: dict[int, int] | None = None,
        *,
        key: bytes | None = None,
    ) -> None:
        """`partitions`: only those (default all); `key`: only the partition that key is written to
        (`partition_of`); `start`/`stop`: offsets per partition to read from / up to."""
        self._conn, self.topic, self._key = conn, topic, key
        self._partitions, self._start, self._stop = partitions, start or {}, stop or {}
        self._consumer: AIOKafkaConsumer  # made once the topic is known to exist: an unstarted one warns when collected
        self.begin: dict[PartitionId, int] = {}
        self.end: dict[PartitionId, int] = {}

    async def __aenter__(self) -> TopicReader:
        async with admin_client(self._conn) as admin:
            counts = await partition_counts(admin, [self.topic])
        if self.topic not in counts:
            raise TopicMissing(
                f"topic {self.topic} does not exist on {self._conn.bootstrap_servers}; check the topic name"
            )
        self._consumer = AIOKafkaConsumer(
            **self._conn.client_kwargs(),
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            fetch_max_wait_ms=50,
        )
        await start_client(self._consumer, self._conn, f"a reader of {self.topic}")
        wanted = range(counts[self.topic]) if self._partitions is None else self._partitions
        if self._key is not None:
            wanted = [partition_of(self._key, counts[self.topic])]
        tps = [TopicPartition(self.topic, p) for p in wanted]
        self._consumer.assign(tps)
        try:
            with self._reading("the offsets"):
                begins = await self._consumer.beginning_offsets(tps)
                ends = await self._consumer.end_offsets(tps)
        except KafkaIOError:
            await self._consumer.stop()  # no __aexit__ when __aenter__ raises
            raise
        for tp in tps:
            pid = PartitionId(*tp)
            self.begin[pid], self.end[pid] = int(begins[tp]), min(int(ends[tp]), self._stop.get(tp.partition, ends[tp]))
            self._consumer.seek(tp, max(self._start.get(tp.partition, 0), self.begin[pid]))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._consumer.stop()

    def _reading(self, what: str) -> AbstractContextManager[None]:
        return map_kafka_errors(
            f"reading {what} of {self.topic} from {self._conn.bootstrap_servers} failed",
            "check the broker and run the command again",
        )

    def seek(self, pid: PartitionId, offset: int) -> None:
        """Read `pid` (again) from `offset`, at least its log start; a scan that reached the end paused it."""
        tp = TopicPartition(*pid)
        self._consumer.resume(tp)
        self._consumer.seek(tp, max(offset, self.begin[pid]))

    async def position(self, pid: PartitionId) -> int:
        with self._reading(f"the position of {pid}"):
            return int(await self._consumer.position(TopicPartition(*pid)))

    async def batches(self, max_records: int = 5000) -> AsyncIterator[list[Record]]:
        """Batches (one partition each, in offset order) until every partition reached its end."""
        async for tp, records in self._fetched(max_records):
            end = self.end[PartitionId(*tp)]
            batch = [
                Record(r.topic, r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                for r in records
                if r.offset < end
            ]
            if batch:
                yield batch

    async def raw_batches(self, max_records: int = 50_000) -> AsyncIterator[Sequence[Any]]:
        """`batches` without a `Record` built per record: aiokafka's own records (their key, value,
        offset and timestamp are what ckptlog/processor/explain/run_replay.py `InputRecord` reads), for
        scans that look at nearly every record only long enough to skip it."""
        async for tp, records in self._fetched(max_records):
            end = self.end[PartitionId(*tp)]
            yield records if not records or records[-1].offset < end else [r for r in records if r.offset < end]

    async def _fetched(self, max_records: int) -> AsyncIterator[tuple[TopicPartition, list[Any]]]:
        remaining = {TopicPartition(*p) for p, end in self.end.items()}
        while remaining:
            for tp in list(remaining):
                if await self.position(PartitionId(*tp)) >= self.end[PartitionId(*tp)]:
                    remaining.discard(tp)
                    self._consumer.pause(tp)
            if not remaining:
                return
            with self._reading("records"):
                fetched = await self._consumer.getmany(*remaining, timeout_ms=200, max_records=max_records)
            for tp, records in fetched.items():
                yield tp, records


async def offsets_at(conn: KafkaConnection, topic: str, when_ms: int) -> dict[int, int]:
    """Per partition of `topic`, the first offset whose record is not older than `when_ms` (ms since
    the epoch); the partition's end where every record is older."""
    async with TopicReader(conn, topic) as reader:
        consumer = reader._consumer
        tps = [TopicPartition(topic, pid.partition) for pid in reader.end]
        with reader._reading("the offsets by time"):
            found = await consumer.offsets_for_times(dict.fromkeys(tps, when_ms))
        return {
            tp.partition: int(meta.offset) if meta is not None else reader.end[PartitionId(*tp)]
            for tp, meta in found.items()
        }


async def read_topic(conn: KafkaConnection, topic: str) -> list[Record]:
    """Every committed record of `topic` up to its current end, per partition in offset order."""
    out: list[Record] = []
    async with TopicReader(conn, topic) as reader:
        async for batch in reader.batches():
            out.extend(batch)
    return out


async def read_latest(conn: KafkaConnection, topic: str) -> dict[bytes, bytes]:
    """A compacted topic as a table: last value per key; tombstones remove the key."""
    table: dict[bytes, bytes] = {}
    async with TopicReader(conn, topic) as reader:
        async for batch in reader.batches():
            for record in batch:
                if record.key is None:
                    continue
                if record.value is None:
                    table.pop(record.key, None)
                else:
                    table[record.key] = record.value
    return table
