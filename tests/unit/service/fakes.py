"""In-memory fakes of the service's ports (ckptlog/processor/service/ports.py): a broker with topics,
a consumer group, transactional and idempotent producers, and a deleter that checks it is only
handed evictions that are already durable. Enough to drive `Processor` without a broker."""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ckptlog.kafka.consumer import AssignmentListener
from ckptlog.kafka.errors import FencedError, KafkaIOError
from ckptlog.kafka.records import Header, InputRecord, OutRecord, PartitionId
from ckptlog.kafka.topics import TopicSpec
from ckptlog.processor.core.outputs import Deletion
from ckptlog.processor.storage.deletion import OnDone


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass
class FakeKafka:
    """The broker and the group's state; implements `KafkaClients`."""

    servers: str = "memory://fake"
    logs: dict[str, list[list[Record]]] = field(default_factory=dict)
    committed: dict[PartitionId, int] = field(default_factory=dict)  # the group's offsets
    epochs: dict[PartitionId, int] = field(default_factory=dict)  # transactional id -> current producer epoch
    fail_commits: dict[PartitionId, int] = field(default_factory=dict)  # pid -> transactions still to fail
    commits: list[tuple[PartitionId, int | None]] = field(default_factory=list)  # (pid, next offset) per transaction
    assignable: list[PartitionId] | None = None  # what the next assignment gives this instance (None: all)
    consumers: list[FakeConsumer] = field(default_factory=list)
    producers: list[FakeTransactional | FakeShared] = field(default_factory=list)
    consumer_background: bool = False  # the consumers made from now on rebalance in a task of their own

    # -- KafkaClients --------------------------------------------------------------------------

    async def ensure_topics(
        self, specs: Sequence[TopicSpec], default_partitions: int, replication_factor: int | None
    ) -> dict[str, int]:
        for spec in specs:
            self.logs.setdefault(spec.name, [[] for _ in range(spec.partitions or default_partitions)])
        return {spec.name: len(self.logs[spec.name]) for spec in specs}

    def consumer(
        self,
        topic: str,
        listener: AssignmentListener,
        *,
        max_records: int,
        session_timeout_ms: int,
        group_instance_id: str | None,
    ) -> FakeConsumer:
        consumer = FakeConsumer(self, topic, listener, max_records)
        consumer.background = self.consumer_background
        self.consumers.append(consumer)
        return consumer

    def transactional_producer(self, pid: PartitionId) -> FakeTransactional:
        producer = FakeTransactional(self, pid)
        self.producers.append(producer)
        return producer

    def shared_producer(self) -> FakeShared:
        producer = FakeShared(self)
        self.producers.append(producer)
        return producer

    # -- the broker ----------------------------------------------------------------------------

    def append(self, records: Iterable[OutRecord]) -> None:
        for topic, key, value, headers, partition in records:
            partitions = self.logs[topic]
            if partition is None:
                partition = zlib.crc32(key or b"") % len(partitions)
            log = partitions[partition]
            log.append(Record(topic, partition, len(log), key, value, headers))

    def values(self, topic: str) -> list[dict[str, object]]:
        return [json.loads(r.value) for log in self.logs[topic] for r in log if r.value is not None]

    def evicted(self) -> set[str]:
        """Checkpoint paths whose eviction is durable (published on the checkpoints topic)."""
        return {
            str(v["data"]["checkpoint_path"])  # type: ignore[index]
            for v in self.values("ckptlog.checkpoints")
            if v.get("type") == "ckptlog.checkpoint_evicted.v2"
        }

    def end(self, pid: PartitionId) -> int:
        return len(self.logs[pid.topic][pid.partition])


class FakeConsumer:
    """Eager rebalances (revoke everything, then assign) run inside `poll`, as aiokafka's do."""

    def __init__(self, kafka: FakeKafka, topic: str, listener: AssignmentListener, max_records: int) -> None:
        self.kafka, self.topic, self.listener, self.max_records = kafka, topic, listener, max_records
        self.assigned: list[PartitionId] = []
        self.positions: dict[PartitionId, int] = {}
        self.paused: set[PartitionId] = set()
        self.rebalance = False
        self.stopped = False
        self.between: Callable[[], Awaitable[None]] | None = None  # runs between a revocation and the assignment
        self.background = False  # rebalances in a task of their own, as aiokafka's coordinator runs them
        self._rebalancing: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.rebalance = True

    def rejoin(self) -> None:
        self.rebalance = True

    async def poll(self, timeout_ms: int) -> Mapping[PartitionId, Sequence[InputRecord]]:
        if self.rebalance:
            self.rebalance = False
            if self.background:  # the poll loop goes on (housekeeping, ticks) while the listener runs
                self._rebalancing = asyncio.get_running_loop().create_task(self._rebalance())
            else:
                await self._rebalance()
        out: dict[PartitionId, Sequence[InputRecord]] = {}
        for pid in self.assigned:
            if pid in self.paused:
                continue
            at = self.positions[pid]
            batch = self.kafka.logs[pid.topic][pid.partition][at : at + self.max_records]
            if batch:
                out[pid] = batch
                self.positions[pid] = batch[-1].offset + 1
        await asyncio.sleep(0 if out else 0.002)
        return out

    async def _rebalance(self) -> None:
        await self.listener.partitions_revoked(list(self.assigned))
        if self.between is not None:  # aiokafka: a seek now lands on the outgoing assignment
            await self.between()
        everything = [PartitionId(self.topic, p) for p in range(len(self.kafka.logs[self.topic]))]
        self.assigned = list(self.kafka.assignable or everything)
        self.positions = {pid: self.kafka.committed.get(pid, 0) for pid in self.assigned}
        await self.listener.partitions_assigned(list(self.assigned))

    def seek(self, pid: PartitionId, offset: int) -> None:
        self.positions[pid] = offset

    def pause(self, pids: Sequence[PartitionId]) -> None:
        self.paused.update(pids)

    def resume(self, pids: Sequence[PartitionId]) -> None:
        self.paused.difference_update(pids)

    async def position(self, pid: PartitionId) -> int:
        return self.positions[pid]

    async def committed(self, pid: PartitionId) -> int | None:
        return self.kafka.committed.get(pid)

    async def log_start(self, pid: PartitionId) -> int:
        return 0

    async def log_end(self, pid: PartitionId) -> int:
        return self.kafka.end(pid)

    async def commit(self, offsets: dict[PartitionId, int]) -> None:
        self.kafka.committed.update(offsets)

    async def stop(self) -> None:
        self.stopped = True


class FakeTransactional:
    """`start` bumps the transactional id's epoch, fencing any older producer of the partition."""

    def __init__(self, kafka: FakeKafka, pid: PartitionId) -> None:
        self.kafka, self.pid, self.epoch, self.stopped = kafka, pid, -1, False

    async def start(self) -> None:
        self.epoch = self.kafka.epochs[self.pid] = self.kafka.epochs.get(self.pid, 0) + 1

    async def commit(self, records: Sequence[OutRecord], offsets: dict[PartitionId, int]) -> None:
        await asyncio.sleep(0)  # the broker round trip: the next batch folds meanwhile
        if self.kafka.epochs[self.pid] != self.epoch:
            raise FencedError(f"{self.pid}: fenced by a newer producer")
        if self.kafka.fail_commits.get(self.pid):
            self.kafka.fail_commits[self.pid] -= 1
            raise KafkaIOError(f"{self.pid}: injected transaction failure")
        self.kafka.append(records)
        self.kafka.committed.update(offsets)
        self.kafka.commits.append((self.pid, offsets.get(self.pid)))

    async def stop(self) -> None:
        self.stopped = True


class FakeShared:
    def __init__(self, kafka: FakeKafka) -> None:
        self.kafka, self.stopped = kafka, False

    async def start(self) -> None:
        return None

    async def publish(self, records: Sequence[OutRecord]) -> None:
        await asyncio.sleep(0)
        self.kafka.append(records)

    async def stop(self) -> None:
        self.stopped = True


class FakeDeleter:
    """Confirms every deletion at once (so completions flow back through the input topic), and
    records any path handed over before its eviction was durable."""

    def __init__(self, kafka: FakeKafka, on_done: OnDone | None) -> None:
        self.kafka, self.on_done = kafka, on_done
        self.submitted: list[str] = []
        self.premature: list[str] = []
        self.claimed: list[tuple[str, str]] = []
        self.retired: list[tuple[str, str]] = []  # the retired claims asked for
        self.reopened: list[tuple[str, str]] = []  # the retired claims asked to go (reopened runs)
        self.closed = False

    def claim_many(
        self,
        claims: Iterable[tuple[str, str]],
        source: str | None = None,
        *,
        retired: bool = False,
        reopened: bool = False,
        at: int | None = None,
    ) -> int:
        claims = list(claims)
        if retired:
            self.retired += claims
        elif reopened:
            self.reopened += claims
        else:
            self.claimed += claims
        return len(claims)

    def submit_many(self, requests: Iterable[Deletion], source: str | None = None) -> int:
        requests = list(requests)
        durable = self.kafka.evicted()
        self.premature += [r.path for r in requests if r.path not in durable]
        self.submitted += [r.path for r in requests]
        if self.on_done is not None and requests:
            asyncio.get_running_loop().call_soon(self.on_done, [(r.run_id, r.path) for r in requests])
        return len(requests)

    def retry_failed(self) -> int:
        return 0

    async def drain(self, timeout: float | None = None) -> bool:
        return True

    async def close(self) -> None:
        self.closed = True
