"""The broker goes away under a running processor and comes back (issue 13, item 3).

A dedicated LocalBroker (not the session's) is stopped — gracefully, then with SIGKILL — while
the processor (a `ckptlog run` subprocess) works through a burst of events, and restarted in
the same directory on the same port. The processor is never restarted: it must reconnect on its
own. Afterwards the crash matrix's checks must hold: views equal a clean fold of the log,
every output id exactly once (exactly_once), watermarks never backwards, the tree intact.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from ckptlog.broker import LocalBroker
from ckptlog.broker.config import free_port
from ckptlog.kafka import IdempotentProducer
from ckptlog.processor.service.harness import event_record
from tests.reliability.crash_matrix import Chain, Scenario

OUTAGES = {  # how the broker goes away, and for how long
    "exactly_once": [("stop", 4.0), ("kill", 8.0)],
    "at_least_once": [("kill", 6.0)],
}
LONG_OUTAGE_S = float(os.environ.get("CKPTLOG_TEST_LONG_OUTAGE_S", "0"))
"""Set (e.g. 50: beyond the clients' 40 s request timeout, so commits fail and partitions are
rebuilt while the broker is away) to add one such outage to each run."""
pytestmark = pytest.mark.timeout(300 + 2 * LONG_OUTAGE_S)


async def burst(chain: Chain, events: int) -> None:
    """A burst the processor is still working through when the broker goes away."""
    producer = IdempotentProducer(chain.conn)
    await producer.start()
    try:
        lines = await asyncio.to_thread(chain.workload.chunk, events)
        await producer.publish([event_record(chain.settings.input_topic, line) for line in lines])
    finally:
        await producer.stop()


def assert_outage_noise_is_a_few_warnings(log: str, outages: int) -> None:
    """Issue 21 #2: aiokafka's outage messages stay at WARNING (ERROR-based alerts would fire on
    every blip) and are rate-limited: on main a 24 s outage wrote ~480 aiokafka ERROR lines."""
    lines = [line for line in log.splitlines() if "logger=aiokafka" in line]
    assert not [line for line in lines if "level=ERROR" in line or "level=CRITICAL" in line], lines[:5]
    assert len(lines) <= 40 * outages, f"{len(lines)} aiokafka lines for {outages} outages: {lines[:5]}"


def take_down(broker: LocalBroker, how: str) -> None:
    if how == "kill":
        state = broker.read_state()
        assert state is not None and state.pid is not None
        os.kill(state.pid, signal.SIGKILL)
    broker.stop()  # graceful; after a kill it only records that the broker is down


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
async def test_processor_rides_out_broker_restarts(tmp_path: Path, guarantee: str) -> None:
    broker = LocalBroker(tmp_path / "broker", free_port(), log=print)
    bootstrap = broker.start()
    chain = Chain(Scenario("broker-faults", (), guarantee, min_events=1500, seed=21), bootstrap, tmp_path / "chain")
    try:
        await chain.prepare()
        instance = chain.processor()
        assert await instance.caught_up(2, 60), f"the processor did not start; see {instance.log}"
        for how, seconds in OUTAGES[guarantee] + ([("kill", LONG_OUTAGE_S)] if LONG_OUTAGE_S else []):
            await asyncio.sleep(1.0)
            await chain.feeder.pause()
            await burst(chain, 1500)
            take_down(broker, how)
            await asyncio.sleep(seconds)
            assert broker.start() == bootstrap
            chain.feeder.resume()
            assert instance.proc.poll() is None, f"the processor exited with the broker away; see {instance.log}"
        await chain.feeder.until(chain.scenario.min_events)
        await chain.feeder.pause()
        await chain.verify()
        assert instance.proc.poll() is None, f"the processor exited; see {instance.log}"
        assert await instance.stop() == 0, f"graceful stop failed; see {instance.log}"
        assert not chain.report.problems, "\n".join(chain.report.problems)
        assert_outage_noise_is_a_few_warnings(instance.text(), len(OUTAGES[guarantee]) + bool(LONG_OUTAGE_S))
    finally:
        await chain.feeder.stop()
        for running in chain.instances:
            running.kill()
        broker.stop()
