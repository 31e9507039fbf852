"""What `ckptlog watch RUN` shows: the run's VIEW from the state topic, and how many of its events
the processor rejected (its dead letters), so a run whose reports are all refused says so instead
of looking like a processor that is not running."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from rich.console import Console
from rich.live import Live
from rich.table import Table

from ckptlog.client.connect import Connection, Topics, resolve
from ckptlog.client.dead_letters import DeadLetterFeed
from ckptlog.client.errors import ClientError
from ckptlog.client.event_warnings import CHECKPOINTS_TOPIC, WarningFeed
from ckptlog.client.reader import AsyncReader
from ckptlog.client.table import run_table, view_line
from ckptlog.client.views import RunView
from ckptlog.events.state import Problem
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.processor.service.views import read_state_topic


def no_view_message(run_id: str, state_topic: str, feed: DeadLetterFeed, problem: Problem | None = None) -> str:
    if problem is not None:
        return (
            f"no readable view of run {run_id!r} on {state_topic}: {problem}; the processor's next VIEW of the run "
            "replaces it (`ckptlog inspect --json` lists every unreadable record)"
        )
    rejected = feed.counts[run_id]
    if not rejected:
        return (
            f"no view of run {run_id!r} on {state_topic}; check the run id and topic, or that the processor is running"
        )
    newest = max(feed.letters.values(), key=lambda d: (d.timestamp or 0, d.dlq_offset), default=None)
    why = f" (the newest: {newest.reason}: {newest.message})" if newest is not None else ""
    return (
        f"no view of run {run_id!r} on {state_topic}: the processor rejected {rejected} of its "
        f"events{why}; `ckptlog rejections {run_id}` lists them"
    )


async def watch(
    console: Console,
    run_id: str,
    score_attribute: str | None,
    once: bool,
    connection: Connection,
    topics: Topics,
    dlq_topic: str,
    checkpoints_topic: str = CHECKPOINTS_TOPIC,
    *,
    limit: int = 0,
) -> None:
    """Print the run's table once (`once`; ClientError when it has no view), or live until cancelled:
    a table redrawn in place on a terminal, else one plain line per change (`_plain`); `limit`: at
    most that many kept checkpoints in the table (ckptlog.client.table.rows_shown; 0: all)."""
    conn = await resolve(None, "ckptlog-watch", connection)
    feed = DeadLetterFeed(conn, dlq_topic, run_id=run_id)
    warned = WarningFeed(conn, checkpoints_topic, run_id=run_id, from_end=False)
    await feed.start()
    await warned.start()
    try:
        if once:
            await _once(console, run_id, score_attribute, conn, topics.state, feed, warned, limit)
            return
        async with AsyncReader(connection=conn, topics=topics) as reader:
            if console.is_terminal:
                await _live(console, run_id, score_attribute, reader, feed, warned, limit)
            else:  # a pipe or a file: rich's Live would show nothing until it stops
                await _plain(console, run_id, score_attribute, reader, feed, warned)
    finally:
        await warned.close()
        await feed.close()


async def _once(
    console: Console,
    run_id: str,
    score_attribute: str | None,
    conn: KafkaConnection,
    state_topic: str,
    feed: DeadLetterFeed,
    warned: WarningFeed,
    limit: int,
) -> None:
    """The run's table as the state topic holds it now, read for this run alone (the other runs'
    records are not decoded: ckptlog/processor/service/views.py), as the live reader would show it first."""
    state = await read_state_topic(conn, state_topic, [run_id])
    await feed.catch_up()
    await warned.catch_up()
    found = state.views.get(run_id)
    head = next((p for p in state.problems if p.key == run_id), None)  # the newest head cannot be read
    if found is None:
        raise ClientError(no_view_message(run_id, state_topic, feed, head or next(iter(state.problems), None)))
    shown = None if head is None else str(head)
    rejected, count = feed.counts[run_id], warned.counts[run_id]
    view = RunView.model_validate(found)
    table = run_table(run_id, view, score_attribute, rejected=rejected, problem=shown, warned=count, limit=limit)
    console.print(table)


async def _live(
    console: Console,
    run_id: str,
    score_attribute: str | None,
    reader: AsyncReader,
    feed: DeadLetterFeed,
    warned: WarningFeed,
    limit: int,
) -> None:
    latest: list[RunView | None] = [None]

    def table() -> Table:
        problem = reader.problem(run_id)
        shown = None if problem is None else str(problem)
        rejected, count = feed.counts[run_id], warned.counts[run_id]
        view = latest[0]
        return run_table(run_id, view, score_attribute, rejected=rejected, problem=shown, warned=count, limit=limit)

    with Live(table(), console=console, auto_refresh=False) as live:

        async def on_rejections() -> None:
            while True:
                await feed.changed.wait()
                feed.changed.clear()
                live.update(table(), refresh=True)

        task = asyncio.create_task(on_rejections())
        try:
            async for view in reader.watch(run_id):
                latest[0] = view
                live.update(table(), refresh=True)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _plain(
    console: Console,
    run_id: str,
    score_attribute: str | None,
    reader: AsyncReader,
    feed: DeadLetterFeed,
    warned: WarningFeed,
) -> None:
    """Without a terminal (`ckptlog watch RUN > file`, `| grep`): one timestamped line (ckptlog.client.table.
    view_line) once the topics are read, then one per change of the run's VIEW, its rejected events
    or its warnings; a change that reads the same is not repeated."""
    said = [""]

    def say() -> None:
        problem = reader.problem(run_id)
        line = view_line(
            run_id,
            reader.table.views.get(run_id),
            score_attribute,
            rejected=feed.counts[run_id],
            problem=None if problem is None else str(problem),
            warned=warned.counts[run_id],
        )
        if line != said[0]:
            said[0] = line
            stamp = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
            console.print(f"{stamp} {line}", markup=False, highlight=False, soft_wrap=True)

    await asyncio.gather(reader.catch_up(), feed.catch_up(), warned.catch_up())
    say()

    async def on_change(changed: asyncio.Event) -> None:
        while True:
            await changed.wait()
            changed.clear()
            say()

    tasks = [asyncio.create_task(on_change(f.changed)) for f in (feed, warned)]
    try:
        async for _ in reader.watch(run_id):
            say()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
