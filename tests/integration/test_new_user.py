"""Issue 17, "What a new user trips over", on a real broker: rejections reach the sender (a
confirming Reporter, `ckptlog rejections`, `watch`, `inspect`), `ckptlog export` feeds `ckptlog
fold`, an evaluator started before its topic exists, a session timeout the broker refuses."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from typer.testing import CliRunner, Result

from ckptlog import AsyncEvaluator, AsyncReporter, EventRejected, Reader, Topics
from ckptlog.cli.main import _register, app
from ckptlog.client import ids
from ckptlog.errors import ConfigError
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.consumer import GroupConsumer
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.foldfile import fold_lines
from ckptlog.processor.service.harness import running, wait_for_views
from ckptlog.processor.service.settings import ServiceSettings
from tests.integration.test_processor_e2e import conn_of, make_settings

pytestmark = pytest.mark.timeout(180)


async def cli(*args: str) -> Result:
    _register()
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env={"COLUMNS": "250", "NO_COLOR": "1"})


def reporter(settings: ServiceSettings, run_id: str) -> AsyncReporter:
    return AsyncReporter(
        run_id,
        bootstrap_servers=settings.bootstrap_servers,
        topic=settings.input_topic,
        confirm=True,
        confirm_timeout_s=30,
        processor_group=settings.group_id,
        dlq_topic=settings.dlq_topic,
    )


async def test_rejections_reach_the_sender_and_the_export_folds_to_the_views(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path)
    runs = tmp_path / "runs"
    common = ["--bootstrap-servers", kafka_bootstrap]
    async with running(settings):
        async with reporter(settings, "good") as good:
            await good.run_started(runs / "good", num_to_keep=1)
            for i in range(3):
                (runs / "good" / f"c{i}").mkdir(parents=True)
                await good.report({"loss": 1.0 / (i + 1)}, runs / "good" / f"c{i}")
            await good.worker_group_restart(2, "preempted")
            with pytest.raises(EventRejected) as stale:
                await good.report({"loss": 0.1}, generation=0)  # from the replaced worker group
            sent = await good.report({"loss": 0.2})  # takes the index the rejected report never used
            assert sent.event_id == ids.report_id("good", 1, 0)
        async with reporter(settings, "lost") as lost:
            with pytest.raises(EventRejected) as outside:
                await lost.run_started(tmp_path / "elsewhere")
        assert stale.value.reason == "stale_generation"
        assert outside.value.reason == "path_outside_root" and "outside" in str(outside.value)
        assert outside.value.letter.topic == settings.input_topic

        listed = await cli("rejections", "lost", "--json", "--dlq-topic", settings.dlq_topic, *common)
        assert listed.exit_code == 0, listed.output
        [letter] = [json.loads(line) for line in listed.stdout.splitlines()]
        assert letter["reason"] == "path_outside_root" and letter["run_id"] == "lost"
        assert letter["source"]["offset"] == outside.value.letter.offset
        assert letter["type"] == "ckptlog.run_started.v1" and letter["message"]
        table = await cli("rejections", "--dlq-topic", settings.dlq_topic, *common)
        assert "2 rejection(s) of any run" in table.stdout and "stale_generation" in table.stdout

        watched = await cli(
            "watch", "lost", "--once", "--state-topic", settings.state_topic, "--dlq-topic", settings.dlq_topic, *common
        )
        assert watched.exit_code == 1 and "rejected 1 of its events" in watched.stderr
        assert "processor is running" not in watched.stderr
        shown = await cli(
            "watch", "good", "--once", "--state-topic", settings.state_topic, "--dlq-topic", settings.dlq_topic, *common
        )
        assert shown.exit_code == 0 and "1 event rejected" in " ".join(shown.stdout.split())

        def read_synchronously() -> list[int]:  # a training script's loop: no event loop of its own
            with Reader(bootstrap_servers=kafka_bootstrap, topics=Topics(state=settings.state_topic)) as sync:
                kept = sync.get_all_reported_checkpoints("good", 4, "committed", timeout_s=20)
                return [c.report_index for c in kept]

        assert await asyncio.to_thread(read_synchronously) == [2]  # num_to_keep=1: the best (and latest)

        inspected = await cli(
            "inspect", "--json", "--state-topic", settings.state_topic, "--dlq-topic", settings.dlq_topic, *common
        )
        document = json.loads(inspected.stdout)
        assert document["rejections"] == {"good": 1, "lost": 1} and set(document["runs"]) == {"good"}
        assert document["runs"]["good"]["committed"] == 4 and sent.offset >= 0
        assert "'lost' has no view" in inspected.stderr and "ckptlog rejections lost" in inspected.stderr

        await _export_folds_to_the_views(settings, tmp_path, common)
        await _topics_check_sees_the_processor(settings, tmp_path, common)


async def _topics_check_sees_the_processor(settings: ServiceSettings, tmp_path: Path, common: list[str]) -> None:
    """`ckptlog topics --check`, the compose file's health check of the processor."""
    config = tmp_path / "topics.json"
    names = ("group_id", "input_topic", "checkpoints_topic", "validations_topic", "watermarks_topic", "state_topic")
    config.write_text(json.dumps({name: getattr(settings, name) for name in (*names, "dlq_topic")}))
    healthy = await cli("topics", "--check", "--config", str(config), *common)
    assert healthy.exit_code == 0, healthy.output
    assert f"group {settings.group_id}: Stable, 1 member(s)" in healthy.stdout
    unknown = await cli("topics", "--check", "--config", str(config), "--group-id", "nobody", *common)
    assert unknown.exit_code == 1 and "no processor in group nobody" in unknown.stderr


async def _export_folds_to_the_views(settings: ServiceSettings, tmp_path: Path, common: list[str]) -> None:
    """`ckptlog export` then `ckptlog fold` gives the processor's views (what-if starts from here);
    the processor's own deletion_completed records are in the file."""
    export = tmp_path / "log.jsonl"
    deadline = time.monotonic() + 30
    while True:
        exported = await cli("export", str(export), "--topic", settings.input_topic, *common)
        assert exported.exit_code == 0, exported.output
        assert f"of {settings.input_topic} ([0] 0.." in exported.stderr
        lines = export.read_bytes().splitlines()
        folded = fold_lines(lines, settings.fold_settings()).document()
        expected = {run: {k: v for k, v in view.items() if k != "evicted"} for run, view in folded["runs"].items()}
        views = await wait_for_views(conn_of(settings), settings.state_topic, expected, timeout_s=2)
        completions = [line for line in lines if b"deletion_completed" in line]
        if (views == expected and completions) or time.monotonic() > deadline:
            break
    assert views == expected and completions
    assert [r["reason"] for r in folded["rejected"]] == ["stale_generation", "path_outside_root"]
    partial = await cli("export", "-", "--topic", settings.input_topic, "--to", "2", *common)
    assert partial.stdout.splitlines() == [line.decode() for line in lines[:2]]
    what_if = await cli(
        "fold", str(export), "--default-num-to-keep", "3", "--storage-root", settings.storage_root or ""
    )
    assert what_if.exit_code == 0 and json.loads(what_if.stdout)["runs"]["good"]["committed"] == 4


async def test_an_evaluator_started_before_its_topic_picks_it_up_at_once(kafka_bootstrap: str) -> None:
    """It used to idle ~5 minutes (the consumer's metadata refresh) before seeing the new topic."""
    topics = Topics.prefixed(f"early-{uuid.uuid4().hex[:8]}")
    evaluator = AsyncEvaluator(
        lambda path: {"ok": 1}, bootstrap_servers=kafka_bootstrap, topics=topics, group_id=topics.events
    )
    task = asyncio.create_task(evaluator.run())
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await asyncio.sleep(2)
        assert not evaluator.ready.is_set() and not task.done()
        await admin.create_topics([NewTopic(topics.validations, 1, 1)])
        await asyncio.wait_for(evaluator.ready.wait(), 20)
    finally:
        evaluator.stop()
        await asyncio.wait_for(task, 30)
        await admin.delete_topics([topics.validations])
        await admin.close()


async def test_a_session_timeout_the_broker_refuses_says_which_setting(
    kafka_bootstrap: str, topic_factory: Any
) -> None:
    topic = await topic_factory()

    class Listener:
        async def partitions_revoked(self, partitions: list[PartitionId]) -> None:
            return None

        async def partitions_assigned(self, partitions: list[PartitionId]) -> None:
            return None

    consumer = GroupConsumer(KafkaConnection(kafka_bootstrap), f"g-{topic}", topic, Listener(), session_timeout_ms=3000)
    await consumer.start()
    try:
        with pytest.raises(ConfigError, match="session timeout of 3000 ms.*--session-timeout-ms"):
            for _ in range(100):
                await consumer.poll(100)
    finally:
        await consumer.stop()
