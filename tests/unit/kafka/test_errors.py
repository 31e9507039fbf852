"""map_kafka_errors: aiokafka's errors become ckptlog's, naming the object and the next step."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError, ProducerFenced

from ckptlog.errors import ConfigError
from ckptlog.kafka.connection import KafkaConnection, start_client
from ckptlog.kafka.errors import (
    FencedError,
    KafkaIOError,
    TopicSetupError,
    best_effort,
    map_kafka_errors,
)
from ckptlog.kafka.producers import TransactionalProducer
from ckptlog.kafka.records import OutRecord, PartitionId


def test_a_kafka_error_names_the_object_the_cause_and_the_next_step() -> None:
    with pytest.raises(KafkaIOError) as caught, map_kafka_errors("in[3]: committing failed", "retry later"):
        raise KafkaTimeoutError("slow")
    assert type(caught.value) is KafkaIOError and isinstance(caught.value.__cause__, KafkaTimeoutError)
    assert str(caught.value) == "in[3]: committing failed: KafkaTimeoutError('slow'); retry later"
    setup = map_kafka_errors("creating t failed", "do it by hand", error=TopicSetupError)
    with pytest.raises(TopicSetupError, match="^creating t failed: .*; do it by hand$"), setup:
        raise KafkaConnectionError("down")


def test_fencing_errors_become_fenced_errors() -> None:
    expected = r"^in\[0\]: txn of p-in-0: fenced by a newer producer \(ProducerFenced\); go$"
    with pytest.raises(FencedError, match=expected), map_kafka_errors("in[0]: txn of p-in-0", "unused", fenced="go"):
        raise ProducerFenced()


def test_other_errors_pass_through_unchanged() -> None:
    for error in (ConfigError("ours"), ValueError("not kafka"), KafkaIOError("already mapped")):
        with pytest.raises(type(error)) as caught, map_kafka_errors("x", "y"):
            raise error
        assert caught.value is error


def test_best_effort_logs_instead_of_raising(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), best_effort(logging.getLogger("t"), "stop_failed", "stopping p failed"):
        raise KafkaConnectionError("gone")
    assert "event=stop_failed" in caplog.text and "stopping p failed" in caplog.text


class Client:
    def __init__(self, error: Exception) -> None:
        self.error, self.stopped = error, False

    async def start(self) -> None:
        raise self.error

    async def stop(self) -> None:
        self.stopped = True


async def test_a_client_that_cannot_start_is_stopped_and_the_error_names_the_servers() -> None:
    client = Client(KafkaConnectionError("refused"))
    with pytest.raises(KafkaIOError, match=r"^group g cannot reach Kafka at h:1: .*check --bootstrap-servers"):
        await start_client(client, KafkaConnection("h:1"), "group g")
    assert client.stopped
    fenced = Client(ProducerFenced())
    with pytest.raises(FencedError, match="owner moved"):
        await start_client(fenced, KafkaConnection("h:1"), "producer", fenced="owner moved")
    assert fenced.stopped


class Transactions:
    """Stands in for AIOKafkaProducer inside TransactionalProducer."""

    def __init__(self, error: Exception) -> None:
        self.error, self.aborted = error, False
        self._txn_manager: Any = self

    def is_in_transaction(self) -> bool:
        return True

    async def begin_transaction(self) -> None:
        return None

    async def send_offsets_to_transaction(self, offsets: object, group_id: str) -> None:
        return None

    async def commit_transaction(self) -> None:
        raise self.error

    async def abort_transaction(self) -> None:
        self.aborted = True


class Batcher:
    async def send_all(self, records: object) -> None:
        return None


@pytest.mark.parametrize(
    ("error", "raised", "aborted"), [(KafkaTimeoutError(), KafkaIOError, True), (ProducerFenced(), FencedError, False)]
)
async def test_a_failed_transaction_is_aborted_unless_fenced(
    error: Exception, raised: type[KafkaIOError], aborted: bool
) -> None:
    producer = TransactionalProducer(KafkaConnection("h:1"), "ckptlog", PartitionId("in", 2), "g")
    real = producer._producer
    producer._producer, producer._batcher = Transactions(error), Batcher()  # type: ignore[assignment]
    try:
        with pytest.raises(raised) as caught:
            await producer.commit([OutRecord("c", b"k", b"v")], {PartitionId("in", 2): 5})
        assert type(caught.value) is raised
        assert "in[2]" in str(caught.value) and "ckptlog-in-2" in str(caught.value)
        next_step = "rejoins the group" if raised is FencedError else "aborted and will be re-processed"
        assert next_step in str(caught.value)
        assert producer._producer.aborted is aborted  # type: ignore[attr-defined]
    finally:
        real._closed = True  # never started: nothing to stop
