"""What the service needs from Kafka, from the deleter and from the claim writer, as protocols.

`Processor` is handed a `KafkaClients` factory instead of building aiokafka clients itself:
`ckptlog.kafka.factory.BrokerClients` is the real one (the only aiokafka user), and the unit
tests drive the whole service through in-memory fakes of these few methods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from ckptlog.kafka.consumer import AssignmentListener
from ckptlog.kafka.records import InputRecord, OutRecord, PartitionId
from ckptlog.kafka.topics import TopicSpec
from ckptlog.processor.core.outputs import Deletion
from ckptlog.processor.service.restore import Offsets
from ckptlog.processor.storage.safety import PendingClaims


class InputConsumer(Offsets, Protocol):
    """The group consumer of the input topic (manual commits, read_committed)."""

    async def start(self) -> None:
        """Join the group; assignments arrive through the listener during `poll`."""

    async def poll(self, timeout_ms: int) -> Mapping[PartitionId, Sequence[InputRecord]]: ...

    def rejoin(self) -> None:
        """Leave and re-enter the group (after being fenced)."""

    def seek(self, pid: PartitionId, offset: int) -> None: ...

    def pause(self, pids: Sequence[PartitionId]) -> None: ...

    def resume(self, pids: Sequence[PartitionId]) -> None: ...

    async def position(self, pid: PartitionId) -> int: ...

    async def commit(self, offsets: dict[PartitionId, int]) -> None:
        """Commit next offsets (at_least_once; exactly_once commits them in the transaction)."""

    async def stop(self) -> None: ...


class SharedProducer(Protocol):
    """One idempotent producer per process: at_least_once outputs and deletion completions."""

    async def start(self) -> None: ...

    async def publish(self, records: Sequence[OutRecord]) -> None:
        """Returns once every record is acknowledged."""

    async def stop(self) -> None: ...


class TransactionalProducer(Protocol):
    """One per input partition (exactly_once); `start` fences the partition's previous owner."""

    async def start(self) -> None: ...

    async def commit(self, records: Sequence[OutRecord], offsets: dict[PartitionId, int]) -> None:
        """One transaction: every record plus the group's next offsets; FencedError when fenced."""

    async def stop(self) -> None: ...


class KafkaClients(Protocol):
    """Builds the processor's Kafka clients; one instance serves one processor."""

    @property
    def servers(self) -> str:
        """Where the clients connect, for logs."""

    async def ensure_topics(
        self, specs: Sequence[TopicSpec], default_partitions: int, replication_factor: int | None
    ) -> dict[str, int]:
        """Create the missing topics; the partition count of each."""

    def consumer(
        self,
        topic: str,
        listener: AssignmentListener,
        *,
        max_records: int,
        session_timeout_ms: int,
        group_instance_id: str | None,
    ) -> InputConsumer: ...

    def transactional_producer(self, pid: PartitionId) -> TransactionalProducer: ...

    def shared_producer(self) -> SharedProducer: ...


class DeletionSink(Protocol):
    """The deleter, as a partition's pipeline uses it; `source` names the input partition."""

    def submit_many(self, requests: Iterable[Deletion], source: str | None = None) -> int:
        """Delete each request's path, for runs folded by input partition `source`."""
        ...


class DeletionService(DeletionSink, Protocol):
    """The processor's deleter (ckptlog.processor.storage.deletion.Deleter): it only deletes; the run
    roots' claims are the `ClaimService`'s."""

    def retry_failed(self) -> int: ...

    async def drain(self, timeout: float | None = None) -> bool: ...

    async def close(self) -> None: ...


class ClaimSink(Protocol):
    """The claim writer (ckptlog/processor/storage/claim_writer.py), as a partition's pipeline uses it;
    `source` names the input partition."""

    def claim_many(
        self,
        claims: Iterable[tuple[str, str]],
        source: str | None = None,
        *,
        retired: bool = False,
        reopened: bool = False,
        at: int | None = None,
    ) -> int:
        """Write each (canonical run root, run id)'s ownership claim in the background (contract §9);
        `retired`/`reopened`: write or remove the run's retired claim, as of input offset `at`."""
        ...


class ClaimService(PendingClaims, ClaimSink, Protocol):
    """The processor's claim writer (ckptlog.processor.storage.claim_writer.ClaimWriter): a partition's
    pipeline queues claims (`claim_many`, ClaimSink), the deleter asks it (`holds`) which paths wait
    for a retired claim still being written or removed."""

    async def close(self) -> None: ...
