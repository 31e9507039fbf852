"""aiokafka's reconnect errors are rate-limited while a broker is away; every other record passes."""

from __future__ import annotations

import logging

import ckptlog.kafka.connection  # noqa: F401 — installs the filter, as every ckptlog Kafka client does
from ckptlog.kafka.throttle import ReconnectThrottle


def record(msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("aiokafka", logging.ERROR, __file__, 1, msg, args, None)


def test_first_passes_then_one_per_interval_saying_how_many_were_held_back() -> None:
    now = [0.0]
    throttle = ReconnectThrottle(interval_s=5.0, clock=lambda: now[0])
    unable = "Unable connect to node with id %s: %s"
    assert throttle.filter(record(unable, 1, "refused"))
    passed = []
    for _ in range(7000):
        now[0] += 0.0005
        passed.append(throttle.filter(record(unable, 1, "refused")))
    assert not any(passed)
    now[0] = 5.5
    again = record(unable, 1, "refused")
    assert throttle.filter(again)
    assert again.getMessage() == (
        "Unable connect to node with id 1: refused (7000 more like it in the last 6s were not logged)"
    )


def test_kinds_are_throttled_apart_and_other_records_pass() -> None:
    throttle = ReconnectThrottle(interval_s=5.0, clock=lambda: 1.0)
    assert throttle.filter(record("Unable connect to node with id %s: %s", 1, "x"))
    assert throttle.filter(record("Unable to update metadata from %s", [1]))
    assert not throttle.filter(record("Unable to update metadata from %s", [1]))
    assert all(throttle.filter(record("Heartbeat failed for group %s", "g")) for _ in range(100))


def test_installed_on_the_aiokafka_logger_once() -> None:
    from ckptlog.kafka import throttle

    throttle.install()
    filters = [f for f in logging.getLogger("aiokafka").filters if isinstance(f, ReconnectThrottle)]
    assert len(filters) == 1
