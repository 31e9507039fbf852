"""The integrations' outbox: a Kafka blip never kills a training job, and no event is dropped silently.

Every event an integration (the Ray callback, ckptlog/integrations/session.py) sends goes through
`Outbox.send`, in order. A send that fails with
`KafkaIOError` (the broker is down or unreachable) keeps the event, and every later one, in a
bounded buffer; the buffer is retried at most once per `retry_interval_s` (a try may block up to
the connection's delivery timeout), oldest first, so event ids and order are what they would have
been. Two clear failures remain: more than `max_buffered` events waiting (an outage longer than
the buffer), and events still waiting `flush_timeout_s` after the controller finished. Both raise
`ReportsUndelivered`, naming the run, the broker, how many events and what to do.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ckptlog.client.errors import ReportsUndelivered
from ckptlog.kafka.errors import KafkaIOError

log = logging.getLogger(__name__)


@dataclass
class Outbox:
    """`send("report", metrics, ...)` calls `target.report(metrics, ...)` now, or once Kafka is back."""

    target: Any
    run_id: str
    max_buffered: int = 1000
    retry_interval_s: float = 30.0
    event_prefix: str = "ray"  # the log lines' event names: ray_reports_buffered, lightning_reports_buffered, ...
    owner: str = "CkptlogCallback"  # what the user raises max_buffered_reports / flush_timeout_s of
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    pending: deque[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=deque)
    last_error: KafkaIOError | None = None
    _next_try: float = float("-inf")

    def send(self, method: str, *args: Any, **kwargs: Any) -> None:
        self.pending.append((method, args, kwargs))
        if self.clock() >= self._next_try:
            self.flush()
        if len(self.pending) > self.max_buffered:
            raise ReportsUndelivered(self._message(f"more than max_buffered_reports={self.max_buffered} wait"))

    def flush(self) -> bool:
        """Send what waits, oldest first, until one fails; True when nothing waits any more."""
        while self.pending:
            method, args, kwargs = self.pending[0]
            try:
                getattr(self.target, method)(*args, **kwargs)
            except KafkaIOError as exc:  # Kafka is away: keep it (and what follows) for the next try
                if self.last_error is None:
                    log.warning("event=%s_reports_buffered run=%r message=%r", self.event_prefix, self.run_id, str(exc))
                self.last_error, self._next_try = exc, self.clock() + self.retry_interval_s
                return False
            except BaseException:
                self.pending.popleft()  # no blip (a bad event, a missing topic): fails as it would unbuffered
                raise
            self.pending.popleft()
        if self.last_error is not None:
            log.warning(
                "event=%s_reports_delivered run=%r message='Kafka is back: every buffered event sent'",
                self.event_prefix,
                self.run_id,
            )
        self.last_error = None
        return True

    def close(self, flush_timeout_s: float) -> None:
        """Retry what waits until `flush_timeout_s` has passed; then ReportsUndelivered if any is left."""
        deadline = self.clock() + flush_timeout_s
        while not self.flush():
            left = deadline - self.clock()
            if left <= 0:
                ended = "the controller" if self.event_prefix == "ray" else "training"
                raise ReportsUndelivered(self._message(f"{ended} finished and {flush_timeout_s:g} s passed"))
            self.sleep(min(self.retry_interval_s, left))

    def _message(self, why: str) -> str:
        cause = f" (the last error: {self.last_error})" if self.last_error is not None else ""
        where = "docs/ray.md#resuming-a-run" if self.event_prefix == "ray" else "docs/integrations.md"
        return (
            f"{len(self.pending)} ckptlog events of run {self.run_id!r} could not be sent: {why}{cause}. "
            "ckptlog fails the job rather than drop them: fix the broker, then resume the run under the same name "
            f"(it goes on in ckptlog, {where}), or raise max_buffered_reports / flush_timeout_s of {self.owner}"
        )
