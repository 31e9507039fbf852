"""The Ray callback's policy while Kafka is away (issue 21 #2): a blip never fails the training job,
an outage longer than the buffer (or than the flush time at the end) fails it with a clear error,
and no event is dropped or reordered on the way."""

from __future__ import annotations

from typing import Any

import pytest

from ckptlog.client.errors import ReportsUndelivered
from ckptlog.integrations.outbox import Outbox
from ckptlog.kafka.errors import KafkaIOError

DOWN = KafkaIOError("Kafka at kafka:9092 did not acknowledge a record for ckptlog.events within 30 s")


class FlakyReporter:
    """Fails every call while `down`; records what got through, in order."""

    def __init__(self) -> None:
        self.down, self.sent, self.tries = False, [], 0

    def report(self, *args: Any) -> None:
        self.tries += 1
        if self.down:
            raise DOWN
        self.sent.append(args)

    run_started = worker_group_restart = validation_result = report


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def outbox(reporter: FlakyReporter, clock: Clock, max_buffered: int = 1000) -> Outbox:
    return Outbox(reporter, "run-1", max_buffered, retry_interval_s=30.0, clock=clock, sleep=clock.sleep)


def test_a_blip_is_ridden_out_in_order_and_without_an_error() -> None:
    reporter, clock = FlakyReporter(), Clock()
    box = outbox(reporter, clock)
    box.send("run_started", "/runs/1")
    reporter.down = True  # the broker goes away: nothing raises into the training job
    for step in range(5):
        clock.now += 1
        box.send("report", {"step": step})
    assert len(box.pending) == 5 and reporter.tries == 2  # one try, then none until the retry interval
    reporter.down = False
    clock.now += 30
    box.send("report", {"step": 5})
    assert reporter.sent == [("/runs/1",), *[({"step": i},) for i in range(6)]]
    assert not box.pending and box.last_error is None


def test_an_unreachable_broker_at_start_does_not_fail_the_job() -> None:
    reporter, clock = FlakyReporter(), Clock()
    reporter.down = True
    box = outbox(reporter, clock)
    box.send("run_started", "/runs/1")  # on main the controller's first call raised: the job failed
    assert list(box.pending) == [("run_started", ("/runs/1",), {})]


def test_an_outage_longer_than_the_buffer_fails_the_job_with_a_clear_error() -> None:
    reporter, clock = FlakyReporter(), Clock()
    reporter.down = True
    box = outbox(reporter, clock, max_buffered=3)
    for step in range(3):
        box.send("report", {"step": step})
    with pytest.raises(ReportsUndelivered) as error:
        box.send("report", {"step": 3})
    message = str(error.value)
    assert "4 ckptlog events of run 'run-1'" in message and "max_buffered_reports=3" in message
    assert "kafka:9092" in message and "resume the run" in message
    assert len(box.pending) == 4  # still held: nothing dropped on the way to the error


def test_events_still_waiting_after_the_flush_time_fail_the_job_at_its_end() -> None:
    reporter, clock = FlakyReporter(), Clock()
    reporter.down = True
    box = outbox(reporter, clock)
    box.send("report", {"step": 0})
    with pytest.raises(ReportsUndelivered, match="the controller finished and 120 s passed"):
        box.close(120.0)
    assert clock.now >= 120.0 and len(box.pending) == 1


def test_events_waiting_at_the_end_are_sent_when_kafka_returns_within_the_flush_time() -> None:
    reporter, clock = FlakyReporter(), Clock()
    reporter.down = True
    box = outbox(reporter, clock)
    box.send("report", {"step": 0})
    box.send("report", {"step": 1})
    original = clock.sleep

    def back_after_a_while(seconds: float) -> None:
        original(seconds)
        reporter.down = clock.now < 60

    clock.sleep = back_after_a_while  # type: ignore[method-assign]
    box.sleep = clock.sleep
    box.close(120.0)
    assert reporter.sent == [({"step": 0},), ({"step": 1},)] and not box.pending


def test_a_non_kafka_error_is_not_buffered() -> None:
    """A bad event or a missing topic is no blip: it fails at once, as before."""

    class Broken:
        def report(self, *args: Any) -> None:
            raise ValueError("checkpoint outside the run's storage_path")

    box = Outbox(Broken(), "run-1")
    with pytest.raises(ValueError, match="storage_path"):
        box.send("report", {})
    assert not box.pending  # not retried before the next event
