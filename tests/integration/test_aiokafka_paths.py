"""The processor on aiokafka's public API (ckptlog/kafka/fence.py, `aiokafka_internals = "off"`)
publishes what it publishes on the fast path: CI runs both, so an aiokafka upgrade that turns the
fast path off costs speed, never correctness."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from ckptlog.kafka import read_topic
from ckptlog.kafka.clients_io import TopicTail
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.fence import Internals
from ckptlog.kafka.producers import Batcher, produce
from ckptlog.kafka.records import OutRecord
from ckptlog.kafka.topics import TopicSpec, ensure_topics
from ckptlog.processor.service.harness import expected_views, produce_events, running, wait_for_views, workload
from ckptlog.processor.service.settings import ServiceSettings
from tests.integration.test_processor_e2e import conn_of, make_dirs, make_settings

pytestmark = pytest.mark.timeout(180)


async def _run(settings: ServiceSettings, lines: list[bytes], root: str) -> dict[str, list[tuple[str, str]]]:
    """Fold `lines` with a processor of `settings`; each run's outputs in order, as (type, data with
    `root` spelt ROOT), but `checkpoints_deleted` (when a deletion is confirmed is timing) and the
    watermarks (one per batch: the last must be the view's)."""
    expected, conn = expected_views(lines, settings), conn_of(settings)
    async with running(settings):
        await produce_events(conn, settings.input_topic, lines)
        views = await wait_for_views(conn, settings.state_topic, expected, timeout_s=60)
    assert views == expected
    outputs: dict[str, list[tuple[str, str]]] = {}
    for role, topic in (("checkpoints", settings.checkpoints_topic), ("validations", settings.validations_topic)):
        for record in await read_topic(conn, topic):
            body = json.loads(record.value or b"")
            if body["type"] != "ckptlog.checkpoints_deleted.v1":
                data = json.dumps(body["data"]).replace(root, "ROOT")
                outputs.setdefault(f"{role} {body['subject']}", []).append((body["type"], data))
    last = {}
    for record in await read_topic(conn, settings.watermarks_topic):
        body = json.loads(record.value or b"")
        last[body["subject"]] = (body["data"]["committed"], body["data"]["validated"])
    assert last == {run: (view["committed"], view["validated"]) for run, view in expected.items()}
    return outputs


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
async def test_the_public_path_publishes_what_the_fast_path_does(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, guarantee: str
) -> None:
    paths: list[bool] = []
    real_init = Batcher.__init__

    def spy(self: Batcher, producer: Any, internals: bool | None = None) -> None:
        real_init(self, producer, internals)
        paths.append(self.internals)

    monkeypatch.setattr(Batcher, "__init__", spy)
    published = []
    for mode in ("auto", "off"):
        root = tmp_path / mode
        root.mkdir()
        extra = {"guarantee": guarantee, "aiokafka_internals": mode}
        settings = await make_settings(topic_factory, kafka_bootstrap, root, **extra)
        lines = workload((root / "runs").as_uri(), runs=3, reports=120, keep=2)
        make_dirs(lines)
        published.append(await _run(settings, lines, (root / "runs").as_uri()))
        assert paths and (mode == "auto" or not any(paths)), f"{mode}: batchers with internals {paths}"
        paths.clear()
        left = [p for p in (root / "runs").rglob("ckpt-*") if p.is_dir()]
        assert len(left) <= 3 * 3, f"{mode}: evicted checkpoints left in storage: {sorted(left)[:5]}"
    assert published[0] == published[1] and sum(map(len, published[0].values())) > 240


@pytest.mark.parametrize("mode", ["auto", "off"])
async def test_a_topic_tail_finds_a_topic_created_after_it_started_on_either_path(
    kafka_bootstrap: str, mode: Internals
) -> None:
    """TopicTail waits for a topic that does not exist yet (readers start before the processor
    made its topics): with internals, its consumer's metadata fetch; without, describe_topics."""
    conn = KafkaConnection(kafka_bootstrap, aiokafka_internals=mode)
    name = f"tail-{mode}-{uuid.uuid4().hex[:8]}"
    tail = TopicTail(conn, name)
    await tail.start()
    try:
        assert await tail.fetch(timeout_ms=100) == []
        await ensure_topics(conn, [TopicSpec(name)], 2)
        await produce(conn, [OutRecord(name, b"k", b"v", partition=1)])
        got: list[Any] = []
        for _ in range(100):
            got += await tail.fetch(timeout_ms=100)
            if got:
                break
        assert [(r.partition, r.key, r.value) for r in got] == [(1, b"k", b"v")]
    finally:
        await tail.stop()
