"""Wait until the processor has committed an event, or raise why it rejected it.

The processor reads its input in a consumer group and commits the group's offset together with
everything an input record produced (exactly_once: in the same transaction; at_least_once: after
every output was acknowledged) — the run's VIEW and, for a rejected record, its dead letter. So
once the group's committed offset on an event's partition is past the event's offset:

- if the DLQ holds a record whose `__connect.errors.topic/partition/offset` headers name the
  event, it was rejected: `EventRejected` with the reason code and the message;
- otherwise it was applied (or was a repeat of an id already applied: a no-op), and the run's
  VIEW on the state topic includes it (its `committed` watermark counts a report).

The DLQ is followed from its end as it was *before* the first confirmed event was sent, so a
dead letter written for it cannot be missed and the DLQ's history is never read.
"""

from __future__ import annotations

import asyncio
import time

from ckptlog.client.dead_letters import DLQ_TOPIC, DeadLetterFeed
from ckptlog.client.errors import ClientError, EventRejected, NotConfirmed
from ckptlog.client.event_warnings import CHECKPOINTS_TOPIC, EventWarning, WarningFeed
from ckptlog.kafka.clients_io import GroupOffsets
from ckptlog.kafka.connection import KafkaConnection

PROCESSOR_GROUP = "ckptlog"
POLL_S = 0.1


class Confirmer:
    """Confirms the events of one run sent after `start()` (see the module docstring)."""

    def __init__(
        self,
        conn: KafkaConnection,
        run_id: str,
        *,
        group_id: str = PROCESSOR_GROUP,
        dlq_topic: str = DLQ_TOPIC,
        checkpoints_topic: str = CHECKPOINTS_TOPIC,
    ) -> None:
        self.run_id, self.group_id = run_id, group_id
        self._feed = DeadLetterFeed(conn, dlq_topic, run_id=run_id, from_end=True)
        self._warnings = WarningFeed(conn, checkpoints_topic, run_id=run_id, from_end=True)
        self._offsets = GroupOffsets(conn, group_id)
        self.first_offset: int | None = None  # the first event sent once following: older ones cannot be confirmed

    async def start(self) -> None:
        await self._offsets.start()
        try:
            await self._feed.start()
            await self._warnings.start()
        except BaseException:
            await self._feed.close()
            await self._offsets.stop()
            raise

    async def close(self) -> None:
        await self._warnings.close()
        await self._feed.close()
        await self._offsets.stop()

    def sent(self, offset: int) -> None:
        """Note an event sent while following (the first one bounds what `confirm` can vouch for)."""
        if self.first_offset is None:
            self.first_offset = offset

    async def confirm(
        self, what: str, topic: str, partition: int, offset: int, timeout_s: float | None
    ) -> tuple[EventWarning, ...]:
        """Return the warnings the event caused once the processor group committed past
        topic[partition]@offset and did not reject it; raise `EventRejected` (it did), `NotConfirmed`
        (not within `timeout_s`). The warnings are committed in the same transaction as the offset."""
        if self.first_offset is None or offset < self.first_offset:
            raise ClientError(
                f"{what} at {topic}[{partition}]@{offset} was sent before confirmations started; pass "
                "confirm=True to the call (or the Reporter) that sends it"
            )
        await self._committed_past(what, topic, partition, offset, timeout_s)
        await self._feed.catch_up()
        letter = self._feed.find(topic, partition, offset)
        if letter is not None:
            raise EventRejected(
                f"{what} was rejected by the processor ({letter.reason}): {letter.message} "
                f"[{letter.source}; `ckptlog rejections {self.run_id}` lists every rejection of the run]",
                letter,
            )
        await self._warnings.catch_up()
        return self._warnings.caused_by(topic, partition, offset)

    async def _committed_past(
        self, what: str, topic: str, partition: int, offset: int, timeout_s: float | None
    ) -> None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            committed = await self._offsets.committed(topic, partition)
            if committed is not None and committed > offset:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise NotConfirmed(
                    f"{what} at {topic}[{partition}]@{offset} was not processed within {timeout_s:g} s: processor "
                    f"group {self.group_id!r} has committed {'nothing' if committed is None else committed} on "
                    f"{topic}[{partition}]; check that `ckptlog run` is running with --group-id {self.group_id} "
                    "(or pass the Reporter its group as processor_group=)"
                )
            await asyncio.sleep(POLL_S)
