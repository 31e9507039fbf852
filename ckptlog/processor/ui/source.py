"""Where the console's data comes from: `Source` (the pages' one interface) and `LiveSource`, which
follows the state topic (an AsyncReader), the checkpoints topic (every run's reported, evicted and
deleted checkpoints and its warnings) and the DLQ (rejections), and asks History for a run's
history and a checkpoint's explanation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from ckptlog.client.connect import Topics, resolve
from ckptlog.client.dead_letters import DeadLetterFeed
from ckptlog.client.reader import AsyncReader
from ckptlog.client.views import RunView
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.reader import Record
from ckptlog.processor.explain.checkpoint import paragraph
from ckptlog.processor.explain.client import History
from ckptlog.processor.service.settings import ServiceSettings
from ckptlog.processor.ui.model import RunLog, View

POLL_S = 0.1
HISTORY_TIMEOUT_S = 20.0


class Source(Protocol):
    def views(self) -> dict[str, View]: ...
    def log(self, run: str) -> RunLog | None: ...
    def rejections(self, run: str) -> int: ...
    async def refresh(self) -> None: ...
    async def history(self, run: str) -> list[dict[str, Any]] | None: ...
    async def explain(self, run: str, path: str) -> tuple[dict[str, Any], str]: ...
    def changes(self) -> AsyncIterator[list[str]]: ...


def parse_output(record: Record) -> tuple[str, str, dict[str, Any]] | None:
    """(run id, output name, data) of a checkpoints-topic record; None for anything else."""
    if record.value is None:
        return None
    try:
        body = json.loads(record.value)
        name, run, data = str(body["type"]).split(".")[1], body["subject"], body["data"]
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None
    return (run, name, data) if isinstance(run, str) and isinstance(data, dict) else None


class CheckpointLog(DeadLetterFeed):
    """Follow the checkpoints topic from its beginning: a RunLog per run."""

    def __init__(self, conn: KafkaConnection, topic: str) -> None:
        super().__init__(conn, topic)
        self.runs: dict[str, RunLog] = {}
        self.touched: set[str] = set()

    def _take(self, records: Sequence[Record]) -> None:
        for record in records:
            parsed = parse_output(record)
            if parsed is None:
                continue
            run, name, data = parsed
            try:
                self.runs.setdefault(run, RunLog()).take(name, data, record.timestamp)
            except (KeyError, TypeError, ValueError):
                continue  # an output not of the shape this version knows
            self.touched.add(run)


class LiveSource:
    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self._dumps: dict[str, tuple[RunView, View]] = {}
        self._started: list[AsyncReader | DeadLetterFeed] = []
        self._histories: dict[str, tuple[object, list[dict[str, Any]]]] = {}

    async def start(self) -> None:
        conn = await resolve(self.settings.bootstrap_servers, "ckptlog-ui", self.settings)
        self.reader = AsyncReader(connection=conn, topics=Topics(state=self.settings.state_topic))
        self.dlq = DeadLetterFeed(conn, self.settings.dlq_topic)
        self.outputs = CheckpointLog(conn, self.settings.checkpoints_topic)
        self.history_client = History(connection=conn, processor=self.settings)
        for client in (self.reader, self.dlq, self.outputs):
            await client.start()
            self._started.append(client)

    async def close(self) -> None:
        for client in reversed(self._started):
            await client.close()
        self._started.clear()

    def views(self) -> dict[str, View]:
        out: dict[str, View] = {}
        for run, view in self.reader.table.views.items():
            cached = self._dumps.get(run)
            if cached is None or cached[0] is not view:
                cached = (view, view.model_dump(mode="json"))
                self._dumps[run] = cached
            out[run] = cached[1]
        return out

    def log(self, run: str) -> RunLog | None:
        return self.outputs.runs.get(run)

    def rejections(self, run: str) -> int:
        return self.dlq.counts[run]

    async def refresh(self) -> None:
        await asyncio.gather(self.reader.catch_up(), self.outputs.catch_up(), self.dlq.catch_up())

    async def history(self, run: str) -> list[dict[str, Any]] | None:
        """The run's history, replayed again only once its VIEW, outputs or rejections changed (a live
        page re-fetched on every change would otherwise replay the log each time); None when the
        replay fails or takes longer than HISTORY_TIMEOUT_S."""
        log = self.outputs.runs.get(run)
        counts = None if log is None else (len(log.reported), len(log.evicted), len(log.deleted), log.warnings)
        key = (self.reader.table.views.get(run), counts, self.dlq.counts[run])
        cached = self._histories.get(run)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            steps = await asyncio.wait_for(self.history_client.history(run), HISTORY_TIMEOUT_S)
        except Exception:
            return None
        self._histories[run] = (key, steps)
        return steps

    async def explain(self, run: str, path: str) -> tuple[dict[str, Any], str]:
        doc = await asyncio.wait_for(self.history_client.explain(run, path), HISTORY_TIMEOUT_S)
        return doc, paragraph(doc)

    async def changes(self) -> AsyncIterator[list[str]]:
        """The runs whose VIEW, outputs or rejections changed, every POLL_S at most."""
        seen: dict[str, RunView] = {}
        rejected = dict(self.dlq.counts)
        while True:
            await asyncio.sleep(POLL_S)
            views = self.reader.table.views
            changed = {run for run, view in views.items() if seen.get(run) is not view}
            seen = dict(views)
            changed |= self.outputs.touched
            self.outputs.touched = set()
            changed |= {run for run, n in self.dlq.counts.items() if rejected.get(run) != n}
            rejected = dict(self.dlq.counts)
            if changed:
                yield sorted(changed)
