"""The newest VIEW per run, with waiting on watermarks: the AsyncReader's logic without Kafka.

Fed with state-topic records by the AsyncReader's tail; `wait_for` and `changes` are the two ways
to wait on it. Kept apart from the AsyncReader so the waiting rules are tested without a broker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from ckptlog.client.errors import ClientError
from ckptlog.client.views import Consistency, ReportedCheckpoint, RunView, check_consistency
from ckptlog.events.codec import DEFAULT_LIMITS, DecodeLimits
from ckptlog.events.state import Problem, StateTable, state_limits
from ckptlog.kafka.reader import Record

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
    def __init__(self, limits: DecodeLimits = DEFAULT_LIMITS) -> None:
        self.views: dict[str, RunView] = {}
        self.state = StateTable(state_limits(limits))  # heads, page parts, what cannot be read
        self._versions: dict[str, int] = {}
        self._changed = asyncio.Condition()
        self._error: BaseException | None = None

    @property
    def problems(self) -> dict[str, Problem]:
        """Record key (a run id, or a page key) -> its newest record that cannot be read, or the run's
        VIEW that cannot be assembled (ckptlog.events.state.Problem)."""
        return self.state.problems

    async def apply(self, records: Sequence[Record]) -> None:
        """Take state-topic records and wake the waiters: a VIEW (key = run id), or one part of a
        page of a run's kept checkpoints (ckptlog.events.view.ViewPage), kept until the run's next head —
        which comes after every part it names — assembles them (ckptlog.events.view.assemble). A record that
        cannot be read is logged and kept as a problem; it never stops the table (ckptlog.events.state)."""
        async with self._changed:
            for record in records:
                where = f"{record.topic}[{record.partition}]@{record.offset}"
                run_id = self.state.take(where, record.key, record.value, record.headers)
                if run_id is not None:
                    self._assembled(run_id)
            for problem in self.state.fresh:
                log.warning(
                    "event=unreadable_state_record at=%s key=%r reason=%r", problem.at, problem.key, problem.reason
                )
            self.state.fresh.clear()
            self._changed.notify_all()

    def _assembled(self, run_id: str) -> None:
        found = self.state.view(run_id)
        if found is None:  # the run's head was removed
            self._bump(run_id, None)
        elif isinstance(found, Problem):
            self.state.problems[run_id] = found
            log.warning("event=unreadable_view run=%r at=%s reason=%r", run_id, found.at, found.reason)
        else:
            self._bump(run_id, found[1])

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
                f"following the state topic failed: {self._error!r}; create a new AsyncReader"
            ) from self._error

    @staticmethod
    def check_wait(report_index: int, consistency: str) -> Consistency:
        """The arguments of a wait, checked (ClientError naming the fix)."""
        mode = check_consistency(consistency)
        if report_index < 0:
            raise ClientError(f"report_index must be >= 0 (got {report_index}); pass the number of reports made")
        return mode

    async def wait_for(
        self, run_id: str, report_index: int, consistency: Consistency = "validated", timeout_s: float | None = None
    ) -> WaitResult:
        """Return once the run's VIEW has watermark >= report_index, or at timeout (reached=False)."""
        mode = self.check_wait(report_index, consistency)
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
