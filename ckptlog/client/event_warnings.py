"""Warnings an event caused (issue 21 #4): the processor applied the event but says something is off.

A validation result for an unknown checkpoint or run, a score that is not a number, a missing
score: the event is applied (or ignored, as Ray would) and the processor writes a `warning`
output on the checkpoints topic. Its id names the input record that caused it
(`ckptlog:{topic}:{partition}:{offset}:{n}`, ckptlog/events/envelope.py `output_id`), so a confirming
Reporter returns the warnings of each event with its confirmation (`SentEvent.warnings`), and
`ckptlog rejections --warnings` lists a run's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ckptlog.client.dead_letters import DeadLetterFeed
from ckptlog.events import topics
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.errors import TopicMissing
from ckptlog.kafka.reader import Record, TopicReader

CHECKPOINTS_TOPIC = topics.CHECKPOINTS
WARNING_TYPE = "ckptlog.warning.v1"


@dataclass(frozen=True, slots=True)
class EventWarning:
    """One warning: its code and message, the checkpoint it is about, and the input that caused it."""

    run_id: str
    code: str
    message: str
    checkpoint_path: str | None
    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def parse_warning(record: Record) -> EventWarning | None:
    """The warning a checkpoints-topic record carries; None for any other output (never raises)."""
    if record.value is None or b'"ckptlog.warning.v' not in record.value[:300]:
        return None
    try:
        body = json.loads(record.value)
        data, caused_by = body["data"], str(body["id"]).removeprefix("ckptlog:")
        topic, partition, offset, _ = caused_by.rsplit(":", 3)
        return EventWarning(
            str(body["subject"]),
            str(data["code"]),
            str(data["message"]),
            data.get("checkpoint_path"),
            topic,
            int(partition),
            int(offset),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None  # a restore's warning (no input offset) or a record that is not ours


class WarningFeed(DeadLetterFeed):
    """Follow the checkpoints topic's warnings (from its end now, with `from_end`), by their input's coordinates."""

    def __init__(
        self, conn: KafkaConnection, topic: str = CHECKPOINTS_TOPIC, *, run_id: str | None, from_end: bool = True
    ) -> None:
        super().__init__(conn, topic, run_id=run_id, from_end=from_end)
        self.warnings: dict[tuple[str, int, int], list[EventWarning]] = {}

    def caused_by(self, topic: str, partition: int, offset: int) -> tuple[EventWarning, ...]:
        return tuple(self.warnings.get((topic, partition, offset), ()))

    def _take(self, records: Sequence[Record]) -> None:
        for warning in (parse_warning(record) for record in records):
            if warning is None:
                continue
            self.counts[warning.run_id] += 1
            if self.run_id is None or warning.run_id == self.run_id:
                self.warnings.setdefault((warning.topic, warning.partition, warning.offset), []).append(warning)


async def read_warnings(
    conn: KafkaConnection, topic: str = CHECKPOINTS_TOPIC, run_id: str | None = None
) -> list[EventWarning]:
    """Every warning on the checkpoints topic now (of `run_id`, or of every run), in log order."""
    found: list[EventWarning] = []
    try:
        async with TopicReader(conn, topic) as reader:
            async for batch in reader.batches():
                for warning in (parse_warning(record) for record in batch):
                    if warning is not None and (run_id is None or warning.run_id == run_id):
                        found.append(warning)
    except TopicMissing:
        return []
    return found


def count_warnings(warnings: Sequence[EventWarning]) -> Counter[str]:
    return Counter(w.run_id for w in warnings)
