"""Saves still being written: each reported once complete, in the order they were made.

A framework that writes checkpoints in the background (`dcp.async_save`, Lightning's
`AsyncCheckpointIO`) returns before the files are complete, and ckptlog must never hear of a
checkpoint before it is (a job that dies then would leave the run's latest half-written). `InFlight`
holds each such save with its future; `poll()` reports those that completed and follow only completed
ones (on the caller's thread: no Kafka I/O in the framework's threads), `wait()` waits for all. A save
whose future failed raises its error there and is never reported. A save without a future is complete.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from ckptlog.integrations.metrics import plain_metrics


class Reports(Protocol):
    def report(self, metrics: dict[str, Any], path: str | None) -> None: ...


class InFlight:
    """See the module docstring; `run` is the TrainerRun that reports."""

    def __init__(self, run: Reports) -> None:
        self.run = run
        self.pending: deque[tuple[str, dict[str, Any], Any]] = deque()  # (path, metrics, future), in save order

    def add(self, path: str, metrics: dict[Any, Any], future: Any = None) -> None:
        """A save of `path`; `future` (a concurrent Future, or an object whose `upload_completion` is one)
        completes when its files do."""
        self.pending.append((path, plain_metrics(metrics), getattr(future, "upload_completion", future)))
        self.poll()

    def poll(self) -> None:
        """Report every save that is complete and follows only complete ones."""
        while self.pending and (self.pending[0][2] is None or self.pending[0][2].done()):
            self._report()

    def wait(self) -> None:
        """Wait for every save in flight, reporting each."""
        while self.pending:
            self._report()

    def _report(self) -> None:
        path, metrics, future = self.pending.popleft()
        if future is not None:
            future.result()  # a failed save raises here and is not reported
        self.run.report(metrics, path)
