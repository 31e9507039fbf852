"""`AsyncReader`: Ray's `get_all_reported_checkpoints`, a run's VIEW, and a live feed of changes.

One reader follows every partition of the compacted state topic from its beginning (no
consumer group, read_committed), keeping the newest VIEW per run (ckptlog.client.view_table).
Compaction keeps that small: one record per run plus the not-yet-compacted tail. Waiting is
on the VIEW's own watermarks (see ckptlog.client.views for why).

    async with AsyncReader() as reader:
        kept = await reader.get_all_reported_checkpoints("run-1", report_index=10)
        async for view in reader.watch("run-1"): ...
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from ckptlog.client.connect import Connection, Topics, resolve
from ckptlog.client.errors import ClientClosed
from ckptlog.client.view_table import ViewTable, WaitResult
from ckptlog.client.views import Consistency, ReportedCheckpoint, RunView
from ckptlog.events.codec import DEFAULT_LIMITS, DecodeLimits
from ckptlog.events.state import Problem
from ckptlog.kafka.clients_io import TopicTail

log = logging.getLogger(__name__)

CATCH_UP_POLL_S = 0.05

__all__ = ["AsyncReader", "WaitResult"]


class AsyncReader:
    def __init__(
        self,
        *,
        bootstrap_servers: str | None = None,
        topics: Topics | None = None,
        connection: Connection | None = None,
        limits: DecodeLimits = DEFAULT_LIMITS,
    ) -> None:
        """`limits`: the processor's --max-payload-bytes and --max-depth, when it runs with others
        than the defaults (a state record beyond what they allow is shown as unreadable)."""
        self.topics = topics or Topics()
        self.table = ViewTable(limits)
        self._bootstrap, self._connection = bootstrap_servers, connection
        self._tail: TopicTail | None = None
        self._task: asyncio.Task[None] | None = None
        self._applied: dict[int, int] = {}  # positions whose records are in the table

    async def start(self) -> None:
        if self._tail is not None:
            return
        conn = await resolve(self._bootstrap, "ckptlog-reader", self._connection)
        tail = TopicTail(conn, self.topics.state)
        await tail.start()
        self._tail = tail
        self._task = asyncio.create_task(self._follow(tail), name="ckptlog-reader")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._tail is not None:
            await self._tail.stop()
        self._task = self._tail = None

    async def __aenter__(self) -> AsyncReader:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def view(self, run_id: str) -> RunView | None:
        """The run's newest VIEW as of now (None for a run the processor has not published)."""
        await self.catch_up()
        return self.table.views.get(run_id)

    def problem(self, run_id: str) -> Problem | None:
        """Why the run's newest state record (or its VIEW) cannot be read, if it cannot; the reader
        then keeps the last VIEW it could read."""
        return self.table.problems.get(run_id)

    async def runs(self) -> dict[str, RunView]:
        """Every run's newest VIEW as of now."""
        await self.catch_up()
        return dict(self.table.views)

    async def get_all_reported_checkpoints(
        self, run_id: str, report_index: int, consistency: Consistency = "validated", timeout_s: float | None = None
    ) -> list[ReportedCheckpoint]:
        """The run's kept checkpoints (best last) once its `consistency` watermark is >=
        `report_index`, or at `timeout_s` with what is known (`wait_for` tells which)."""
        return (await self.wait_for(run_id, report_index, consistency, timeout_s)).checkpoints

    async def wait_for(
        self, run_id: str, report_index: int, consistency: Consistency = "validated", timeout_s: float | None = None
    ) -> WaitResult:
        """Wait until the run's `consistency` watermark is >= `report_index`. The wait first reads
        everything the state topic holds at the call (as `view` does), so a VIEW already there is
        found whatever the timeout. `timeout_s` counts from the call; the catch-up is not cut short
        by it, so the call returns after max(timeout_s, the catch-up) at most (a broken feed raises)."""
        self._require_started()
        self.table.check_wait(report_index, consistency)
        loop = asyncio.get_running_loop()
        called = loop.time()
        await self.catch_up()
        remaining = None if timeout_s is None else max(0.0, timeout_s - (loop.time() - called))
        return await self.table.wait_for(run_id, report_index, consistency, remaining)

    async def watch(self, run_id: str) -> AsyncIterator[RunView]:
        """Yield the run's current VIEW, then each newer one (a burst yields only its last)."""
        await self.catch_up()
        async for view in self.table.changes(run_id):
            yield view

    async def catch_up(self) -> None:
        """Wait until every record on the state topic now has been read."""
        tail = self._require_started()
        ends = await tail.end_offsets()
        while any(self._applied.get(p, 0) < end for p, end in ends.items()):
            self.table.raise_error()
            await asyncio.sleep(CATCH_UP_POLL_S)

    async def _follow(self, tail: TopicTail) -> None:
        try:
            while True:
                records = await tail.fetch()
                if records:
                    await self.table.apply(records)
                self._applied = await tail.positions()  # after apply: catch_up never runs ahead of the table
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.error("event=reader_failed topic=%s error=%r", self.topics.state, exc)
            await self.table.fail(exc)

    def _require_started(self) -> TopicTail:
        if self._tail is None:
            raise ClientClosed(
                "the AsyncReader is not started; use `async with AsyncReader() as reader:` or await start()"
            )
        return self._tail
