"""Integration fixtures: one real Kafka broker per session and throw-away topics.

Broker choice, first match wins:
0. $CKPTLOG_TEST_SHARED_BOOTSTRAP: the one broker a parallel run (`pytest -n N`, pytest-xdist) shares
   among its workers, started and stopped by the controller (tests/shared_broker.py);
1. $KAFKA_BOOTSTRAP_SERVERS (an existing cluster; nothing is started or stopped);
2. testcontainers' Kafka module, when a Docker engine answers within ~2 s;
3. ckptlog's own LocalBroker (real Apache Kafka jars, no Docker) in a tmp dir on a
   free port, stopped when the session ends.
Set CKPTLOG_TEST_BROKER=local or =docker to force 2 or 3.

Every test collected under tests/integration is marked `integration`, so
`pytest -m "not integration"` runs only the pure unit tests.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from ckptlog.broker import LocalBroker
from ckptlog.broker.config import free_port
from ckptlog.errors import CkptlogError
from tests.shared_broker import SHARED_BOOTSTRAP_ENV

INTEGRATION_DIR = Path(__file__).resolve().parent
TESTCONTAINERS_IMAGE = "confluentinc/cp-kafka:7.6.0"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that lives under tests/integration as `integration`."""
    for item in items:
        if INTEGRATION_DIR in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.integration)


def _docker_answers(timeout: float = 2.0) -> bool:
    """A quick yes/no: is there a Docker engine we can start containers on?"""
    try:
        import docker

        client = docker.from_env(timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # no client lib, no socket, no permission, timeout: all mean no
        return False


def _container_kafka() -> Iterator[str]:
    """Kafka in Docker via testcontainers (KRaft, transactions on one node)."""
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:  # older testcontainers layout
        from testcontainers.kafka import KafkaContainer
    container = (
        KafkaContainer(TESTCONTAINERS_IMAGE)
        .with_kraft()
        .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
        .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
        .with_env("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "false")
    )
    with container:
        yield str(container.get_bootstrap_server())


def _local_kafka(tmp_dir: Path) -> Iterator[str]:
    """ckptlog's LocalBroker on a free port; always stopped at the end."""
    broker = LocalBroker(tmp_dir, free_port(), log=lambda msg: print(f"[kafka] {msg}"))
    try:
        bootstrap = broker.start()
    except CkptlogError as exc:
        pytest.fail(f"could not start a local Kafka broker for integration tests: {exc}")
    try:
        yield bootstrap
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`host:port` of a real Kafka broker shared by the whole session."""
    configured = (
        os.environ.get(SHARED_BOOTSTRAP_ENV, "").strip() or os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    )
    if configured:
        yield configured
        return
    mode = os.environ.get("CKPTLOG_TEST_BROKER", "auto")
    if mode == "docker" or (mode == "auto" and _docker_answers()):
        yield from _container_kafka()
    else:
        yield from _local_kafka(tmp_path_factory.mktemp("kafka-broker"))


class TopicFactory(Protocol):
    """`await topic_factory(partitions=1, config=None, prefix=None) -> topic name`."""

    def __call__(
        self, partitions: int = 1, config: dict[str, str] | None = None, *, prefix: str | None = None
    ) -> Awaitable[str]: ...


def _slug(text: str) -> str:
    """A legal, short topic-name stem from a test name (parametrize ids included)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:60] or "topic"


def _raise_topic_errors(response: Any, name: str) -> None:
    for entry in getattr(response, "topic_errors", []):
        if entry[1]:
            detail = entry[2] if len(entry) > 2 else ""
            raise RuntimeError(f"creating topic {name} failed: error {entry[1]} {detail}")


async def _wait_for_topic(admin: AIOKafkaAdminClient, name: str, partitions: int) -> None:
    """Block until metadata shows every partition with a leader (max ~10 s)."""
    for _ in range(100):
        topics = await admin.describe_topics([name])
        parts = topics[0]["partitions"] if topics and topics[0]["error_code"] == 0 else []
        if len(parts) == partitions and all(p["leader"] >= 0 for p in parts):
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"topic {name} did not get leaders for {partitions} partitions")


@pytest.fixture
async def topic_factory(kafka_bootstrap: str, request: pytest.FixtureRequest) -> AsyncIterator[TopicFactory]:
    """Create uniquely named topics for one test; they are deleted afterwards."""
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap, client_id="ckptlog-tests")
    await admin.start()
    created: list[str] = []
    stem = _slug(request.node.name)

    async def make(partitions: int = 1, config: dict[str, str] | None = None, *, prefix: str | None = None) -> str:
        name = f"{_slug(prefix) if prefix else stem}-{uuid.uuid4().hex[:10]}"
        response = await admin.create_topics([NewTopic(name, partitions, 1, topic_configs=config or {})])
        _raise_topic_errors(response, name)
        created.append(name)
        await _wait_for_topic(admin, name, partitions)
        return name

    try:
        yield make
    finally:
        try:
            if created:
                await admin.delete_topics(created)
        except Exception:  # best effort: a dead broker must not mask the test result
            pass
        await admin.close()
