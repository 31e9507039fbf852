"""Delivery guarantees on a real broker: zombie fencing (exactly_once), repeats with equal ids (at_least_once)."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from ckptlog.kafka import GroupConsumer, PartitionId, read_topic, transactional_id
from ckptlog.kafka.producers import retrieve_failures
from ckptlog.processor.service.harness import expected_views, produce_events, running, wait_for_views, workload
from ckptlog.processor.service.settings import load_settings
from tests.integration.test_processor_e2e import conn_of, make_settings

pytestmark = pytest.mark.timeout(120)


async def test_zombie_owner_is_fenced_and_outputs_stay_exactly_once(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path)
    lines = workload((tmp_path / "runs").as_uri(), runs=2, reports=40, keep=None, validation_share=0.3)
    half = len(lines) // 2
    conn = conn_of(settings)
    txn_id = transactional_id(settings.txn_prefix, PartitionId(settings.input_topic, 0))
    async with running(settings) as processor:
        await produce_events(conn, settings.input_topic, lines[:half])
        await wait_for_views(conn, settings.state_topic, expected_views(lines[:half], settings))
        # Another owner of partition 0 initialises the same transactional id: the processor is now the zombie.
        other = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=txn_id)
        await other.start()
        try:
            await produce_events(conn, settings.input_topic, lines[half:])
            expected = expected_views(lines, settings)
            assert await wait_for_views(conn, settings.state_topic, expected) == expected
            assert processor.rejoins >= 1  # its commit failed; it rejoined and fenced `other` in turn
            with pytest.raises(KafkaError):
                async with other.transaction():
                    await (await other.send(settings.checkpoints_topic, b"zombie output", key=b"run-0"))
        finally:
            retrieve_failures(other)  # aiokafka leaves the fenced error on internal futures
            await other.stop()
    outputs = await read_topic(conn, settings.checkpoints_topic)
    assert b"zombie output" not in [r.value for r in outputs]
    ids = Counter(_id(r.value) for r in outputs)
    assert ids and max(ids.values()) == 1, "read_committed sees every output exactly once"


def _id(value: bytes | None) -> str:
    import json

    assert value is not None
    return str(json.loads(value)["id"])


async def test_at_least_once_repeats_outputs_with_identical_ids(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, guarantee="at_least_once")
    lines = workload((tmp_path / "runs").as_uri(), runs=2, reports=30, keep=None, validation_share=0.3)
    conn = conn_of(settings)
    expected = expected_views(lines, settings)

    async def lost_commit(self: GroupConsumer, offsets: dict[PartitionId, int]) -> None:
        return None  # a crash between publishing and committing: outputs out, offsets not

    monkeypatch.setattr(GroupConsumer, "commit", lost_commit)
    async with running(settings):
        await produce_events(conn, settings.input_topic, lines)
        assert await wait_for_views(conn, settings.state_topic, expected) == expected
    monkeypatch.undo()
    first = len(await read_topic(conn, settings.checkpoints_topic))
    restarted = load_settings(None, **{**settings.model_dump(), "snapshots": str(tmp_path / "fresh")})
    async with running(restarted):
        for _ in range(100):
            outputs = await read_topic(conn, settings.checkpoints_topic)
            if len(outputs) >= 2 * first:
                break
            import asyncio

            await asyncio.sleep(0.2)
    assert len(outputs) == 2 * first
    copies: dict[str, list[bytes | None]] = defaultdict(list)
    for record in outputs:
        copies[_id(record.value)].append(record.value)
    assert all(len(v) == 2 and v[0] == v[1] for v in copies.values()), "every repeat is byte-identical"
