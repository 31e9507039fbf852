"""`History`: the answers of `ckptlog history`, `explain` and `inspect --as-of`, in Python.

    async with History() as history:
        steps = await history.history("run-1")                 # every decision, replayed from the log
        why = await history.explain("run-1", "s3://b/run-1/c3")  # one checkpoint's state and story
        then = await history.view("run-1", as_of=1234)         # the VIEW right after input offset 1234

It replays with the processor's own fold, so it lives in the processor's package: the client
library (`ckptlog`) never imports the fold (tests/unit/test_architecture.py), and a `AsyncReader`
stays a light follower of the state topic.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ckptlog.client.connect import Connection, resolve
from ckptlog.client.views import RunView
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.processor.explain.checkpoint import explain
from ckptlog.processor.explain.source import history_of, views_as_of
from ckptlog.processor.service.settings import ServiceSettings, load_settings


class History:
    """`processor`: the processor's settings (input topic, snapshot URL, fold settings); default:
    read from the CKPTLOG_* environment (and `config`, a --config file) as `ckptlog run` reads them."""

    def __init__(
        self,
        *,
        bootstrap_servers: str | None = None,
        connection: Connection | None = None,
        processor: ServiceSettings | None = None,
    ) -> None:
        self._bootstrap, self._connection = bootstrap_servers, connection
        self.settings = processor if processor is not None else load_settings(None)
        self._conn: KafkaConnection | None = None

    async def __aenter__(self) -> History:
        if self._conn is None:
            given = self._connection if self._connection is not None else self.settings
            self._conn = await resolve(self._bootstrap or self.settings.bootstrap_servers, "ckptlog-history", given)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._conn = None

    async def history(self, run_id: str, *, until: int | datetime | None = None) -> list[dict[str, Any]]:
        """Each input event of the run up to `until` (inclusive; an offset of its input partition or a
        time; None: now) and what it did: the JSON lines of `ckptlog history --json`."""
        replayed = await history_of(await self._connected(), self.settings, run_id, until)
        return [step.to_json() for step in replayed.replay.steps[run_id]]

    async def explain(self, run_id: str, path: str) -> dict[str, Any]:
        """One checkpoint's state now and why: the document of `ckptlog explain --json` (`state`
        is "unknown" for a run or path the log does not know)."""
        replay = (await history_of(await self._connected(), self.settings, run_id)).replay
        return explain(run_id, path, replay.steps[run_id], replay.state(run_id))

    async def view(self, run_id: str, *, as_of: int | datetime) -> RunView | None:
        """The run's VIEW right after input offset (or time) `as_of`, from the newest snapshot at or
        before it plus a replay; None when the run had no state then."""
        found = await views_as_of(await self._connected(), self.settings, [run_id], as_of)
        view = found.views.get(run_id)
        return None if view is None else RunView.model_validate(view)

    async def _connected(self) -> KafkaConnection:
        await self.__aenter__()
        assert self._conn is not None
        return self._conn
