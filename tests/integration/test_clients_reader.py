"""AsyncReader on a real broker: returns at the watermark, at the timeout, follows changes; and one
end-to-end run through the real processor and an evaluator."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

from ckptlog import AsyncEvaluator, AsyncReader, AsyncReporter, Topics
from ckptlog.demo.training import file_url
from ckptlog.events.outputs import encode_json
from ckptlog.kafka.clients_io import EventProducer, delete_topics
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.reader import read_topic
from ckptlog.processor.foldfile import fold_lines
from ckptlog.processor.service.processor import Processor
from ckptlog.processor.service.settings import ServiceSettings
from tests.integration.conftest import TopicFactory


def view(committed: int, validated: int, paths: list[str]) -> dict[str, Any]:
    ckpts = [{"path": p, "metrics": {"acc": i}, "status": "COMMITTED", "report_index": i} for i, p in enumerate(paths)]
    return {
        "checkpoints": ckpts,
        "latest": paths[-1] if paths else None,
        "best": paths[-1] if paths else None,
        "committed": committed,
        "validated": validated,
        "generation": 0,
        "index_in_generation": committed,
    }


class StateWriter:
    """Publishes VIEWs the way the processor does (key = run id) — no processor needed."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic, self.producer = topic, EventProducer(KafkaConnection(bootstrap))

    async def __aenter__(self) -> StateWriter:
        await self.producer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.producer.stop()

    async def put(self, run: str, body: dict[str, Any]) -> None:
        await self.producer.send(self.topic, run.encode(), encode_json(body))


async def test_returns_at_the_watermark(kafka_bootstrap: str, topic_factory: TopicFactory) -> None:
    state = await topic_factory(partitions=2, config={"cleanup.policy": "compact"})
    async with (
        StateWriter(kafka_bootstrap, state) as writer,
        AsyncReader(bootstrap_servers=kafka_bootstrap, topics=Topics(state=state)) as reader,
    ):
        await writer.put("r", view(1, 1, ["/a"]))
        waiter = asyncio.create_task(reader.get_all_reported_checkpoints("r", 3, "validated", timeout_s=20))
        await writer.put("r", view(3, 2, ["/a", "/b", "/c"]))  # committed 3, but one still pending
        await asyncio.sleep(0.5)
        assert not waiter.done()
        await writer.put("other", view(9, 9, ["/x"]))
        await writer.put("r", view(3, 3, ["/b", "/c"]))
        kept = await asyncio.wait_for(waiter, 10)
        assert [c.path for c in kept] == ["/b", "/c"]
        committed = await reader.get_all_reported_checkpoints("r", 3, "committed", timeout_s=1)
        assert len(committed) == 2
        assert (await reader.view("other")) is not None and (await reader.view("nobody")) is None


async def test_returns_at_the_timeout_with_what_is_known(kafka_bootstrap: str, topic_factory: TopicFactory) -> None:
    state = await topic_factory()
    async with (
        StateWriter(kafka_bootstrap, state) as writer,
        AsyncReader(bootstrap_servers=kafka_bootstrap, topics=Topics(state=state)) as reader,
    ):
        await writer.put("r", view(2, 2, ["/a", "/b"]))
        await reader.catch_up()
        started = time.monotonic()
        result = await reader.wait_for("r", 5, "committed", timeout_s=1.0)
        assert 0.9 < time.monotonic() - started < 3
        assert not result.reached and [c.path for c in result.checkpoints] == ["/a", "/b"]


async def test_a_fresh_reader_finds_a_view_already_on_the_topic_whatever_its_timeout(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """Issue 20: a fresh AsyncReader's wait started before its tail had read the topic, so a short timeout
    returned [] for a run whose VIEW was already there. The wait now first catches up."""
    state = await topic_factory(partitions=3, config={"cleanup.policy": "compact"})
    async with StateWriter(kafka_bootstrap, state) as writer:
        await writer.put("r", view(3, 3, ["/a", "/b"]))
    for timeout_s in (0.0, 0.01):
        async with AsyncReader(bootstrap_servers=kafka_bootstrap, topics=Topics(state=state)) as reader:
            kept = await reader.get_all_reported_checkpoints("r", 3, "validated", timeout_s=timeout_s)
            assert [c.path for c in kept] == ["/a", "/b"], timeout_s


async def test_watch_follows_changes(kafka_bootstrap: str, topic_factory: TopicFactory) -> None:
    state = await topic_factory()
    async with (
        StateWriter(kafka_bootstrap, state) as writer,
        AsyncReader(bootstrap_servers=kafka_bootstrap, topics=Topics(state=state)) as reader,
    ):
        await writer.put("r", view(1, 1, ["/a"]))
        seen: list[int] = []
        first = asyncio.Event()

        async def follow() -> None:
            async for v in reader.watch("r"):
                seen.append(v.committed)
                first.set()
                if v.committed == 2:
                    return

        task = asyncio.create_task(follow())
        await asyncio.wait_for(first.wait(), 10)
        await writer.put("r", view(2, 2, ["/a", "/b"]))
        await asyncio.wait_for(task, 10)
        assert seen == [1, 2]


def judge(checkpoint_path: str, *, bonus: float = 0.0) -> dict[str, Any]:
    return {"acc": 0.5 + bonus}


async def test_end_to_end_with_the_processor(kafka_bootstrap: str, tmp_path: Path) -> None:
    prefix = f"e2e-{uuid.uuid4().hex[:8]}"
    topics = Topics.prefixed(prefix)
    settings = ServiceSettings(
        bootstrap_servers=kafka_bootstrap,
        group_id=prefix,
        input_topic=topics.events,
        checkpoints_topic=f"{prefix}.checkpoints",
        validations_topic=topics.validations,
        watermarks_topic=topics.watermarks,
        state_topic=topics.state,
        dlq_topic=f"{prefix}.dlq",
        replication_factor=1,
        storage_root=file_url(tmp_path / "runs"),
        snapshots=file_url(tmp_path / "snaps"),
    )
    processor = Processor(settings)
    evaluator = AsyncEvaluator(judge, bootstrap_servers=kafka_bootstrap, topics=topics, group_id=f"{prefix}-eval")
    tasks = [asyncio.create_task(processor.run())]
    try:
        await asyncio.wait_for(processor.ready.wait(), 30)
        tasks.append(asyncio.create_task(evaluator.run()))
        root = tmp_path / "runs" / "r1"
        async with (
            AsyncReporter("r1", bootstrap_servers=kafka_bootstrap, topic=topics.events) as reporter,
            AsyncReader(bootstrap_servers=kafka_bootstrap, topics=topics) as reader,
        ):
            await reporter.run_started(file_url(root), num_to_keep=2, checkpoint_score_attribute="acc")
            for i in range(4):
                (root / f"c{i}").mkdir(parents=True)
                validation = {"fn_kwargs": {"bonus": i / 10}, "timeout_s": 10} if i % 2 else False
                await reporter.report({"acc": i / 10, "step": i}, file_url(root / f"c{i}"), validation)
            result = await reader.wait_for("r1", 4, "validated", timeout_s=30)
        assert result.reached
        records = await read_topic(KafkaConnection(kafka_bootstrap), topics.events)
        expected = fold_lines(r.value for r in records if r.value).document()["runs"]["r1"]
        assert result.view is not None and result.view.model_dump() == {
            k: v for k, v in expected.items() if k != "evicted"
        }
        assert [(c.report_index, c.status) for c in result.checkpoints] == [(1, "VALIDATED"), (3, "VALIDATED")]
    finally:
        evaluator.stop()
        processor.stop()
        await asyncio.gather(*tasks)
        await delete_topics(
            KafkaConnection(kafka_bootstrap),
            [
                settings.input_topic,
                settings.checkpoints_topic,
                settings.validations_topic,
                settings.watermarks_topic,
                settings.state_topic,
                settings.dlq_topic,
            ],
        )
