"""The dead-letter topic, read back: why the processor rejected an event, and where it came from.

The processor writes each rejected input record to the DLQ with its original key (the run id)
and bytes, plus Kafka Connect-style headers naming the source topic/partition/offset, the stage
and the message, and `__ckptlog.errors.reason` (ckptlog/events/dead_letters.py, docs/processor.md
"Dead-letter records"). `parse` turns such a record into a `DeadLetter`; `read_dead_letters`
reads the topic once (`ckptlog rejections`, `ckptlog inspect`); `DeadLetterFeed` follows it
(`ckptlog watch`, the Reporter's `confirm=True`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ckptlog.events import topics
from ckptlog.events.codec import DEFAULT_LIMITS, DecodeLimits, Undecodable, decode_json
from ckptlog.events.dead_letters import H_CLASS, H_MESSAGE, H_OFFSET, H_PARTITION, H_REASON, H_STAGE, H_TOPIC
from ckptlog.events.rejections import Reason
from ckptlog.kafka.clients_io import TopicTail
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.errors import TopicMissing
from ckptlog.kafka.reader import Record, TopicReader

DLQ_TOPIC = topics.DLQ
CATCH_UP_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One rejected input event: the reason code and message, and the coordinates of the original."""

    run_id: str | None
    reason: str
    message: str
    stage: str
    topic: str
    partition: int
    offset: int
    event_id: str | None
    event_type: str | None
    exception: str
    dlq_partition: int
    dlq_offset: int
    timestamp: int | None
    value: bytes | None
    undecodable: str | None = None
    """Why the original value is not shown as text (not UTF-8, over the size or nesting limit), else None."""

    @property
    def source(self) -> str:
        """`topic[partition]@offset` of the rejected record."""
        return f"{self.topic}[{self.partition}]@{self.offset}"

    @property
    def time(self) -> str | None:
        """When the processor dead-lettered it (UTC, ISO 8601), if the broker kept a timestamp."""
        if self.timestamp is None or self.timestamp < 0:
            return None
        return datetime.fromtimestamp(self.timestamp / 1000, UTC).isoformat(timespec="seconds")

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: the original bytes as text, or `value: null` and `undecodable` saying why
        (the record itself is at `dlq`)."""
        value = self.value.decode("utf-8") if self.value is not None and self.undecodable is None else None
        return {
            "run_id": self.run_id,
            "reason": self.reason,
            "message": self.message,
            "stage": self.stage,
            "source": {"topic": self.topic, "partition": self.partition, "offset": self.offset},
            "event_id": self.event_id,
            "type": self.event_type,
            "time": self.time,
            "dlq": {"partition": self.dlq_partition, "offset": self.dlq_offset},
            "value": value,
            "undecodable": self.undecodable,
        }


def parse(record: Record, limits: DecodeLimits = DEFAULT_LIMITS) -> DeadLetter | None:
    """The dead letter a DLQ record carries; None for a record without ckptlog's headers. Never
    raises: the original value is decoded within the processor's `limits` (it may be anything)."""
    headers = {name: raw.decode("utf-8", "replace") for name, raw in record.headers if raw is not None}
    if H_REASON not in headers or H_OFFSET not in headers:
        return None
    decoded = decode_json(record.value, limits) if record.value else None
    shown = isinstance(decoded, Undecodable) and decoded.code not in _SHOWN
    body = decoded if isinstance(decoded, dict) else {}
    subject = body.get("subject")
    run_id = record.key.decode("utf-8", "replace") if record.key is not None else None
    return DeadLetter(
        run_id=run_id if run_id is not None else subject if isinstance(subject, str) else None,
        reason=headers[H_REASON],
        message=headers.get(H_MESSAGE, ""),
        stage=headers.get(H_STAGE, ""),
        topic=headers.get(H_TOPIC, ""),
        partition=_int(headers.get(H_PARTITION)),
        offset=_int(headers.get(H_OFFSET)),
        event_id=_text(body.get("id")),
        event_type=_text(body.get("type")),
        exception=headers.get(H_CLASS, ""),
        dlq_partition=record.partition,
        dlq_offset=record.offset,
        timestamp=record.timestamp,
        value=record.value,
        undecodable=str(decoded) if shown else None,
    )


_SHOWN = {Reason.INVALID_JSON, Reason.INVALID_ENVELOPE}
"""Undecodable values still shown as text: UTF-8 within the limits, only not JSON (or not an object)."""


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(text: str | None) -> int:
    try:
        return int(text) if text is not None else -1
    except ValueError:
        return -1


async def read_dead_letters(
    conn: KafkaConnection, topic: str = DLQ_TOPIC, run_id: str | None = None, limits: DecodeLimits = DEFAULT_LIMITS
) -> list[DeadLetter]:
    """Every dead letter on `topic` up to its current end (of `run_id` only, when given), per DLQ
    partition in offset order; [] when the topic does not exist yet."""
    letters: list[DeadLetter] = []
    try:
        async with TopicReader(conn, topic) as reader:
            async for batch in reader.batches():
                letters.extend(
                    letter
                    for letter in (parse(record, limits) for record in batch)
                    if letter is not None and (run_id is None or letter.run_id == run_id)
                )
    except TopicMissing:
        return []
    return letters


def count_by_run(letters: Sequence[DeadLetter]) -> Counter[str]:
    return Counter(letter.run_id for letter in letters if letter.run_id is not None)


class DeadLetterFeed:
    """Follow the DLQ (from its beginning, or with `from_end` from its end now), keeping a count per
    run and the dead letters of `run_id` (all runs when None) by the coordinates of their original."""

    def __init__(
        self,
        conn: KafkaConnection,
        topic: str = DLQ_TOPIC,
        *,
        run_id: str | None = None,
        from_end: bool = False,
        limits: DecodeLimits = DEFAULT_LIMITS,
    ) -> None:
        self.topic, self.run_id, self.limits = topic, run_id, limits
        self.counts: Counter[str] = Counter()
        self.letters: dict[tuple[str, int, int], DeadLetter] = {}
        self.changed = asyncio.Event()
        self._tail = TopicTail(conn, topic, from_end=from_end)
        self._task: asyncio.Task[None] | None = None
        self._positions: dict[int, int] = {}
        self._error: BaseException | None = None

    async def start(self) -> None:
        await self._tail.start()
        self._positions = await self._tail.positions()
        self._task = asyncio.create_task(self._follow(), name=f"ckptlog-dlq-{self.topic}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self._tail.stop()

    def find(self, topic: str, partition: int, offset: int) -> DeadLetter | None:
        return self.letters.get((topic, partition, offset))

    async def catch_up(self) -> None:
        """Wait until every dead letter on the topic now has been read."""
        ends = await self._tail.end_offsets()
        while any(self._positions.get(p, 0) < end for p, end in ends.items()):
            if self._error is not None:
                raise self._error
            await asyncio.sleep(CATCH_UP_POLL_S)

    def _take(self, records: Sequence[Record]) -> None:
        for letter in (parse(record, self.limits) for record in records):
            if letter is None or letter.run_id is None:
                continue
            self.counts[letter.run_id] += 1
            if self.run_id is None or letter.run_id == self.run_id:
                self.letters[(letter.topic, letter.partition, letter.offset)] = letter

    async def _follow(self) -> None:
        try:
            while True:
                records = await self._tail.fetch()
                if records:
                    self._take(records)
                    self.changed.set()
                self._positions = await self._tail.positions()  # after taking: catch_up never runs ahead
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._error = exc
