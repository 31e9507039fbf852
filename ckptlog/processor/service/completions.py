"""Deletion completions: `ckptlog.deletion_completed.v2` written back to the input partition.

They go through a plain idempotent producer, not the partition's transactions: a completion
is an idempotent fact ("this path is gone"), so it needs no atomicity with anything, and
keeping our own records out of the input partition's transactions means the processor never
holds back its own input (a read_committed consumer cannot read past an open transaction's
first record). Queued completions are sent every `interval_s`; a failed send is logged and
retried with the next flush; at worst (a crash) the deletion is resubmitted after restore.
"""

from __future__ import annotations

import asyncio
import logging

from ckptlog.errors import CkptlogError
from ckptlog.kafka.records import OutRecord
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.service.ports import SharedProducer

log = logging.getLogger(__name__)


class CompletionWriter:
    def __init__(self, producer: SharedProducer, interval_s: float = 0.05) -> None:
        self._producer, self._interval_s = producer, interval_s
        self._queue: list[OutRecord] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.written = 0

    def extend(self, records: list[OutRecord]) -> None:
        if records:
            self._queue.extend(records)
            self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.flush()
            await asyncio.sleep(self._interval_s)  # gather what arrives meanwhile into one send

    async def flush(self) -> None:
        batch, self._queue = self._queue, []
        if not batch:
            return
        try:
            crash_point("completions.before_send")
            await self._producer.publish(batch)
            crash_point("completions.sent")
        except CkptlogError as exc:
            log.warning("event=completions_failed count=%d error=%s; retrying with the next flush", len(batch), exc)
            self._queue[:0] = batch
            return
        self.written += len(batch)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.flush()
