"""Rate-limit aiokafka's outage messages while a broker is away, and keep them at WARNING.

aiokafka's metadata loop retries a failed reconnect without backoff and logs two ERROR lines per
attempt: with the broker down, a processor logged ~7,000 lines a second (the reliability suite's
broker-fault test: 56,000 lines for a 12 s outage), and a client's producer a WARNING per retried
produce request. This filter passes the first of each such message, then at most one per
`interval_s`, each saying how many like it were held back, and logs them at WARNING: an outage is
not an application error (ERROR-based alerts would fire on every blip; ckptlog's own error, raised
when a call gives up, says what failed). Every other record passes untouched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

RECONNECT_MESSAGES = frozenset(
    {
        "Unable connect to node with id %s: %s",
        "Unable to update metadata from %s",
        'Unable connect to "%s:%s": %s',
        "Unable to request metadata from node with id %s: %r",
        "Got error produce response: %s",
        "Failed fetch messages from %s: %s",
        "Failed fetch offsets from %s: %s",
        "Error sending %s to node %s [%s] -- marking coordinator dead",
        "Marking the coordinator dead (node %s)for group %s.",
        "Heartbeat send request failed: %s. Will retry.",
        "Group Coordinator Request failed: %s",
        "FindCoordinator Request failed: %s",
        "Auto offset commit failed: %s",
        "Heartbeat session expired - marking coordinator dead",
        "Heartbeat failed for group %s: coordinator (node %s) is either not started or not valid",
        "Got error produce response on topic-partition %s, retrying. Error: %s",
        "OffsetCommit failed for group %s due to group error (%s), will rejoin",  # after one: it rejoins
    }
)
"""What aiokafka logs, again and again, while a broker cannot be reached."""


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
        if record.levelno > logging.WARNING:
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        if held:
            record.msg = f"{record.msg} (%d more like it in the last %.0fs were not logged)"
            record.args = (*(record.args if isinstance(record.args, tuple) else ()), held, now - passed_at)
        return True


LOGGERS = (
    "aiokafka",
    "aiokafka.conn",
    "aiokafka.producer.sender",
    "aiokafka.consumer.fetcher",
    "aiokafka.consumer.group_coordinator",
)
"""Where those messages come from (a logger's filters do not apply to its children's records)."""


def install() -> None:
    """Once per process: one shared filter on each logger those messages come from."""
    shared = ReconnectThrottle()
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ReconnectThrottle) for f in logger.filters):
            logger.addFilter(shared)
