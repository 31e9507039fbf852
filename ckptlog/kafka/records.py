"""Plain record types shared by the Kafka adapter and the service (no aiokafka here).

The service never sees aiokafka types: it reads records through `InputRecord` (which
aiokafka's `ConsumerRecord` satisfies structurally, so nothing is copied on the hot path)
and hands `OutRecord`s to a producer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

Header = tuple[str, bytes]


class PartitionId(NamedTuple):
    """One partition of one topic; prints as `topic[partition]` in logs and errors."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


class InputRecord(Protocol):
    """What the service reads from a consumed record."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...

    @property
    def headers(self) -> Sequence[Header]: ...


class OutRecord(NamedTuple):
    """One record to produce; `partition=None` lets the key choose (murmur2, as Java does).

    A NamedTuple: millions are built on the hot path, and tuple construction is the cheapest."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    partition: int | None = None
