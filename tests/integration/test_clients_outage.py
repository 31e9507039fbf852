"""Kafka down (issue 21 #2): a send waits up to the connection's delivery timeout, then raises
ckptlog's KafkaIOError naming the broker and the next step; closing does not wait again; and
aiokafka's reconnect noise is a few WARNING lines per outage, not hundreds of ERRORs.

A broker of its own (real Apache Kafka jars), stopped mid-test: the session broker stays up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptlog import ConnectionSettings, KafkaIOError, Reporter
from ckptlog.broker import LocalBroker
from ckptlog.broker.config import free_port
from ckptlog.errors import CkptlogError
from ckptlog.kafka.topics import TopicSpec

pytestmark = pytest.mark.timeout(180)
DELIVERY_TIMEOUT_S = 3.0


@pytest.fixture
def doomed_broker(tmp_path: Path) -> Iterator[tuple[LocalBroker, str]]:
    """(a broker the test may stop, its address)."""
    broker = LocalBroker(tmp_path / "broker", free_port())
    try:
        bootstrap = broker.start()
    except CkptlogError as exc:
        pytest.fail(f"could not start a local broker: {exc}")
    try:
        yield broker, bootstrap
    finally:
        broker.stop()


def test_a_report_while_kafka_is_down_fails_in_the_delivery_timeout_with_ckptlogs_error(
    doomed_broker: tuple[LocalBroker, str], caplog: pytest.LogCaptureFixture
) -> None:
    broker, bootstrap = doomed_broker
    conn = ConnectionSettings(bootstrap_servers=bootstrap, delivery_timeout_s=DELIVERY_TIMEOUT_S)
    create_topic(conn, "outage.events")
    reporter = Reporter("down-run", connection=conn, topic="outage.events")
    reporter.report({"loss": 1.0})  # up: acknowledged
    broker.stop()
    with caplog.at_level(logging.DEBUG, logger="aiokafka"):
        began = time.monotonic()
        with pytest.raises(KafkaIOError) as error:
            reporter.report({"loss": 0.5})
        failed_after = time.monotonic() - began
        reporter.close()
        closed_after = time.monotonic() - began - failed_after
        time.sleep(1)
    message = str(error.value)
    assert bootstrap in message and "outage.events" in message, message
    assert "retried safely" in message and "CKPTLOG_DELIVERY_TIMEOUT_S" in message
    assert failed_after < DELIVERY_TIMEOUT_S + 3, f"report() blocked {failed_after:.1f} s"
    assert closed_after < 3, f"close() waited {closed_after:.1f} s again"
    noisy = [r for r in caplog.records if r.name.startswith("aiokafka") and r.levelno >= logging.WARNING]
    for r in noisy:
        print(r.name, r.levelname, r.getMessage()[:150])
    assert not [r for r in noisy if r.levelno >= logging.ERROR], "aiokafka's outage noise must stay at WARNING"
    assert len(noisy) <= 10, f"{len(noisy)} aiokafka lines for one outage"


def create_topic(conn: ConnectionSettings, name: str) -> None:
    import asyncio

    from ckptlog.kafka.topics import ensure_topics

    async def main() -> None:
        await ensure_topics(conn.connect(conn.bootstrap_servers or "", "outage-test"), [TopicSpec(name, 1)], 1)

    asyncio.run(main())
