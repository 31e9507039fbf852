"""Rate-limit aiokafka's reconnect errors while a broker is away.

aiokafka's metadata loop retries a failed reconnect without backoff and logs two ERROR lines per
attempt: with the broker down, a processor logged ~7,000 lines a second (the reliability suite's
broker-fault test: 56,000 lines for a 12 s outage). This filter passes the first of each such
message, then at most one per `interval_s`, each saying how many like it were held back. Every
other record passes untouched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

RECONNECT_MESSAGES = frozenset({"Unable connect to node with id %s: %s", "Unable to update metadata from %s"})


class ReconnectThrottle(logging.Filter):
    def __init__(self, interval_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval_s, self._clock = interval_s, clock
        self._last: dict[str, tuple[float, int]] = {}  # message -> (last passed at, held back since)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg not in RECONNECT_MESSAGES:
            return True
        now = self._clock()
        passed_at, held = self._last.get(record.msg, (float("-inf"), 0))
        if now - passed_at < self.interval_s:
            self._last[record.msg] = (passed_at, held + 1)
            return False
        self._last[record.msg] = (now, 0)
        if held:
            record.msg = f"{record.msg} (%d more like it in the last %.0fs were not logged)"
            record.args = (*(record.args if isinstance(record.args, tuple) else ()), held, now - passed_at)
        return True


def install(logger_name: str = "aiokafka") -> None:
    """Once per process: the filter on aiokafka's client logger (where those messages come from)."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, ReconnectThrottle) for f in logger.filters):
        logger.addFilter(ReconnectThrottle())
