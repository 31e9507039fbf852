"""Reporter on a real broker: valid events, key = run id, deterministic ids, idempotent producer."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from ckptlog import AsyncReporter, Reporter
from ckptlog.cli.main import _register, app
from ckptlog.client import ids
from ckptlog.events.codec import decode_event
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.reader import read_topic
from ckptlog.processor.foldfile import fold_lines
from tests.integration.conftest import TopicFactory

REPO = Path(__file__).resolve().parents[2]


async def _sent_values(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes]]:
    return [(r.key, r.value) for r in await read_topic(KafkaConnection(bootstrap), topic) if r.value is not None]


async def test_async_reporter_sends_valid_events_and_a_rerun_repeats_the_ids(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = await topic_factory(partitions=2)

    async def job() -> list[str]:
        async with AsyncReporter("run-a", bootstrap_servers=kafka_bootstrap, topic=topic) as reporter:
            pid, acks = reporter._producer.guarantees  # type: ignore[union-attr]
            assert pid is not None and acks == -1, "idempotent producer with acks=all"
            sent = [await reporter.run_started(tmp_path, num_to_keep=1, checkpoint_score_attribute="acc")]
            for i in range(3):
                sent.append(await reporter.report({"acc": i / 10}, tmp_path / f"c{i}", validation=(i == 1)))
            sent.append(await reporter.worker_group_restart(2, "preempted"))
            sent.append(await reporter.report({"acc": 0.9}, tmp_path / "c3"))
        assert len({(s.topic, s.partition) for s in sent}) == 1, "key = run id keeps a run on one partition"
        return [s.event_id for s in sent]

    first = await job()
    assert await job() == first, "re-running the job sends the very same ids"
    assert first[1:4] == [ids.report_id("run-a", None, i) for i in range(3)]
    assert first[5] == ids.report_id("run-a", 1, 0)
    values = await _sent_values(kafka_bootstrap, topic)
    events = [decode_event(value, key) for key, value in values]
    assert [e.type.split(".")[1] for e in events[:6]] == [
        "run_started",
        "report",
        "report",
        "report",
        "worker_group_restart",
        "report",
    ]
    folded = fold_lines(v for _, v in values)
    assert not folded.rejected and folded.duplicates == 6
    view = folded.document()["runs"]["run-a"]
    assert view["committed"] == 4 and view["generation"] == 1 and view["validated"] == 1


async def test_sync_reporter_from_plain_code(kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path) -> None:
    topic = await topic_factory()

    def training_loop() -> list[str]:  # what a user's synchronous loop does (own thread, no event loop)
        with Reporter("run-s", bootstrap_servers=kafka_bootstrap, topic=topic) as reporter:
            reporter.run_started(tmp_path, num_to_keep=2)
            return [reporter.report({"loss": 1.0 / (i + 1)}, tmp_path / f"c{i}").event_id for i in range(3)]

    sent = await asyncio.to_thread(training_loop)
    assert sent == [ids.report_id("run-s", None, i) for i in range(3)]
    values = await _sent_values(kafka_bootstrap, topic)
    assert all(key == b"run-s" for key, _ in values) and len(values) == 4
    assert fold_lines(v for _, v in values).document()["runs"]["run-s"]["committed"] == 3


async def test_report_cli_prints_ids_and_a_rerun_is_harmless(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = await topic_factory()
    _register()
    args = [
        "report",
        "run-c",
        "-m",
        "loss=0.5",
        "--checkpoint",
        str(tmp_path / "c1"),
        "--start",
        str(tmp_path),
        "--keep",
        "2",
        "--score-attribute",
        "loss",
        "--score-order",
        "min",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--topic",
        topic,
    ]

    def invoke() -> list[str]:
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        return result.stdout.split()

    first, second = await asyncio.to_thread(invoke), await asyncio.to_thread(invoke)
    assert first == second and len(first) == 2
    bad = await asyncio.to_thread(
        CliRunner().invoke,
        app,
        [*args[:2], "--keep", "0", "--start", str(tmp_path), "--bootstrap-servers", kafka_bootstrap, "--topic", topic],
    )
    assert bad.exit_code == 1 and "num_to_keep" in bad.stderr
    folded = fold_lines(v for _, v in await _sent_values(kafka_bootstrap, topic))
    assert folded.duplicates == 2 and folded.document()["runs"]["run-c"]["committed"] == 1


async def test_example_train_loop(kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path) -> None:
    topic = await topic_factory()
    cmd = [
        sys.executable,
        "examples/train_loop.py",
        "--run-id",
        "ex",
        "--steps",
        "4",
        "--storage",
        str(tmp_path),
        "--bootstrap-servers",
        kafka_bootstrap,
        "--topic",
        topic,
    ]
    proc = await asyncio.to_thread(subprocess.run, cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    folded = fold_lines(v for _, v in await _sent_values(kafka_bootstrap, topic))
    view = folded.document()["runs"]["ex"]
    assert not folded.rejected and view["committed"] == 4 and len(view["checkpoints"]) == 3
    assert all((tmp_path / "ex" / f"checkpoint_{i:05d}").is_dir() for i in range(4))
