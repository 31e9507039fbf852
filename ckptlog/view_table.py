"""The newest VIEW per run, with waiting on watermarks: the Reader's logic without Kafka.

Fed with state-topic records by the Reader's tail; `wait_for` and `changes` are the two ways
to wait on it. Kept apart from the Reader so the waiting rules are tested without a broker.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ckptlog.errors import ClientError
from ckptlog.views import Consistency, ReportedCheckpoint, RunView, check_consistency
from events.view import assemble, parse_page_key
from processor.kafka.reader import Record

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WaitResult:
    """What `wait_for` knows when it returns: `reached` False means it timed out."""

    view: RunView | None
    reached: bool

    @property
    def checkpoints(self) -> list[ReportedCheckpoint]:
        return list(self.view.checkpoints) if self.view is not None else []


class ViewTable:
    def __init__(self) -> None:
        self.views: dict[str, RunView] = {}
        self._parts: dict[str, dict[tuple[int, int], Any]] = {}  # run -> (page, part) -> page record
        self._versions: dict[str, int] = {}
        self._changed = asyncio.Condition()
        self._error: BaseException | None = None

    async def apply(self, records: Sequence[Record]) -> None:
        """Take state-topic records and wake the waiters: a VIEW (key = run id), or one part of a
        page of a run's kept checkpoints (events.view.ViewPage), kept until the run's next head —
        which comes after every part it names — assembles them (events.view.assemble)."""
        async with self._changed:
            for record in records:
                if record.key is None:
                    continue
                name = record.key.decode("utf-8", "replace")
                page = parse_page_key(name)
                if page is not None:
                    self._page(page, record.value)
                elif record.value is None:  # tombstone: the run was removed
                    self._parts.pop(name, None)
                    self._bump(name, None)
                else:
                    self._head(name, record.value, record.offset)
            self._changed.notify_all()

    def _page(self, page: tuple[str, int, int], value: bytes | None) -> None:
        run_id, number, part = page
        parts = self._parts.setdefault(run_id, {})
        if value is None:
            parts.pop((number, part), None)
            return
        try:
            parts[(number, part)] = json.loads(value)
        except ValueError as exc:
            log.warning("event=bad_view_page run=%s page=%d part=%d error=%s", run_id, number, part, exc)

    def _head(self, run_id: str, value: bytes, offset: int) -> None:
        try:
            view = RunView.model_validate(assemble(json.loads(value), self._parts.get(run_id, {})))
        except (ValueError, ValidationError) as exc:
            log.warning("event=bad_view run=%s offset=%d error=%s", run_id, offset, exc)
            return
        if view.newer_than(self.views.get(run_id)):
            self._bump(run_id, view)

    def _bump(self, run_id: str, view: RunView | None) -> None:
        if view is None:
            self.views.pop(run_id, None)
        else:
            self.views[run_id] = view
        self._versions[run_id] = self._versions.get(run_id, 0) + 1

    async def fail(self, error: BaseException) -> None:
        """The feed broke: every waiter raises instead of hanging."""
        async with self._changed:
            self._error = error
            self._changed.notify_all()

    def raise_error(self) -> None:
        if self._error is not None:
            raise ClientError(
                f"following the state topic failed: {self._error!r}; create a new Reader"
            ) from self._error

    async def wait_for(
        self, run_id: str, report_index: int, consistency: Consistency = "validated", timeout_s: float | None = None
    ) -> WaitResult:
        """Return once the run's VIEW has watermark >= report_index, or at timeout (reached=False)."""
        mode = check_consistency(consistency)
        if report_index < 0:
            raise ClientError(f"report_index must be >= 0 (got {report_index}); pass the number of reports made")
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        async with self._changed:
            while True:
                self.raise_error()
                view = self.views.get(run_id)
                if view is not None and view.reached(report_index, mode):
                    return WaitResult(view, True)
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    return WaitResult(view, False)
                try:
                    await asyncio.wait_for(self._changed.wait(), remaining)
                except TimeoutError:
                    pass

    async def changes(self, run_id: str) -> AsyncIterator[RunView]:
        """The run's current VIEW (once it has one), then each newer one; bursts are coalesced."""
        seen = -1
        while True:
            async with self._changed:
                while True:
                    self.raise_error()
                    version, view = self._versions.get(run_id, -1), self.views.get(run_id)
                    if version != seen and view is not None:
                        break
                    await self._changed.wait()
                seen = version
            yield view
