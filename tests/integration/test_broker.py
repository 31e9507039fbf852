"""The broker under the integration tests is a real Kafka: transactions, idempotence,
consumer-group rebalancing and durable restarts all behave as Kafka's do."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from ckptlog.broker import LocalBroker, ToolMissingError
from ckptlog.broker.config import free_port

if TYPE_CHECKING:
    from .conftest import TopicFactory


async def read_all(bootstrap: str, topic: str, isolation: str, timeout: float = 20.0) -> list[bytes]:
    """Every visible value of partition 0 of `topic`, from the start up to its end offset."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, 0)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)  # the LSO under read_committed
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while [tp for tp in tps if await consumer.position(tp) < end[tp]]:
            assert time.monotonic() < deadline, f"timed out reading {topic}: {values}"
            batches = await consumer.getmany(*tps, timeout_ms=200)
            for tp in tps:
                values += [r.value for r in batches.get(tp, []) if r.value is not None]
        return values
    finally:
        await consumer.stop()


async def produce_transactions(bootstrap: str, topic: str) -> None:
    """One aborted and one committed transaction, two records each."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"tx-{topic}")
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"aborted-1")
        await producer.send_and_wait(topic, b"aborted-2")
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send_and_wait(topic, b"committed-1")
            await producer.send_and_wait(topic, b"committed-2")
    finally:
        await producer.stop()


async def test_transactions_hide_aborted_records_from_read_committed(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = await topic_factory(1)
    await produce_transactions(kafka_bootstrap, topic)

    committed = await read_all(kafka_bootstrap, topic, "read_committed")
    uncommitted = await read_all(kafka_bootstrap, topic, "read_uncommitted")

    assert committed == [b"committed-1", b"committed-2"]
    assert uncommitted == [b"aborted-1", b"aborted-2", b"committed-1", b"committed-2"]


async def test_idempotent_producer_writes_each_record_once_in_order(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = await topic_factory(1)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=True, linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(topic, str(i).encode()) for i in range(300)]
        metadata = await asyncio.gather(*futures)
    finally:
        await producer.stop()

    assert [m.offset for m in metadata] == list(range(300))
    assert await read_all(kafka_bootstrap, topic, "read_uncommitted") == [str(i).encode() for i in range(300)]


async def _poll_until(consumers: list[AIOKafkaConsumer], done: Callable[[], bool], timeout: float) -> None:
    """Keep every consumer polling (that drives its group membership) until `done()`."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, [c.assignment() for c in consumers]
        await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))


async def test_consumer_group_rebalances_partitions_between_members(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = await topic_factory(4)
    everything = {TopicPartition(topic, p) for p in range(4)}
    group = f"group-{uuid.uuid4().hex[:8]}"

    def member() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            topic, bootstrap_servers=kafka_bootstrap, group_id=group,
            heartbeat_interval_ms=300, session_timeout_ms=6000, auto_offset_reset="earliest",
        )  # fmt: skip

    first, second = member(), member()
    await first.start()
    try:
        await _poll_until([first], lambda: first.assignment() == everything, 30)
        await second.start()
        try:
            # Both members own partitions, none twice, none missing. (Right after the
            # join `first` may briefly still hold everything: wait for the split.)
            await _poll_until(
                [first, second],
                lambda: (
                    bool(first.assignment())
                    and bool(second.assignment())
                    and not first.assignment() & second.assignment()
                    and first.assignment() | second.assignment() == everything
                ),
                30,
            )
            assert len(first.assignment()) == len(second.assignment()) == 2
        finally:
            await second.stop()  # leaves the group: its partitions move to `first`
        await _poll_until([first], lambda: first.assignment() == everything, 30)
    finally:
        await first.stop()


async def _start_or_skip(broker: LocalBroker) -> str:
    try:
        return await asyncio.to_thread(broker.start)
    except ToolMissingError as exc:
        pytest.skip(str(exc))


async def test_local_broker_restart_keeps_committed_data(tmp_path: Path) -> None:
    broker = LocalBroker(tmp_path / "broker", free_port())
    try:
        bootstrap = await _start_or_skip(broker)
        topic = f"durable-{uuid.uuid4().hex[:8]}"
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(topic, 1, 1)])
        await admin.close()
        await produce_transactions(bootstrap, topic)

        assert await asyncio.to_thread(broker.stop) is True
        assert not broker.status().running
        assert await asyncio.to_thread(broker.start) == bootstrap  # same port again

        assert await read_all(bootstrap, topic, "read_committed") == [b"committed-1", b"committed-2"]
    finally:
        await asyncio.to_thread(broker.stop)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    code = "from ckptlog.cli.main import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, "broker", *args],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


def test_cli_start_is_idempotent_and_stop_is_clean(tmp_path: Path) -> None:
    broker_dir, port = str(tmp_path / "cli-broker"), free_port()
    try:
        first = _cli("start", "--dir", broker_dir, "--port", str(port))
        if first.returncode != 0 and "install a JDK" in first.stderr:
            pytest.skip(first.stderr)
        assert first.returncode == 0, first.stderr
        assert first.stdout.strip().splitlines()[-1] == f"127.0.0.1:{port}"
        again = _cli("start", "--dir", broker_dir)
        assert again.returncode == 0 and again.stdout.strip().splitlines()[-1] == f"127.0.0.1:{port}"
        assert _cli("status", "--dir", broker_dir).returncode == 0
    finally:
        stopped = _cli("stop", "--dir", broker_dir)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert _cli("status", "--dir", broker_dir).returncode == 1
    assert "no broker running" in _cli("stop", "--dir", broker_dir).stdout
