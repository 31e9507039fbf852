"""Issue 38 item 4: `ckptlog watch RUN` with its output piped (no terminal) prints a plain line at
once and one per change of the run, instead of nothing until it stops. A real processor and broker,
the command in a subprocess whose stdout is a pipe."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ckptlog import AsyncReporter
from ckptlog.processor.service.harness import running
from tests.integration.test_processor_e2e import make_settings

pytestmark = pytest.mark.timeout(180)
REPO = Path(__file__).resolve().parents[2]


async def _line(stream: asyncio.StreamReader, timeout_s: float = 30.0) -> str:
    return (await asyncio.wait_for(stream.readline(), timeout_s)).decode()


async def test_watch_into_a_pipe_prints_a_line_at_start_and_one_per_change(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path)
    root = tmp_path / "runs" / "piped"
    for i in range(3):
        (root / f"c{i}").mkdir(parents=True)
    topics = ["--state-topic", settings.state_topic, "--dlq-topic", settings.dlq_topic]
    topics += ["--checkpoints-topic", settings.checkpoints_topic, "--bootstrap-servers", kafka_bootstrap]
    async with running(settings), AsyncReporter(
        "piped", bootstrap_servers=kafka_bootstrap, topic=settings.input_topic, confirm=True,
        processor_group=settings.group_id, dlq_topic=settings.dlq_topic, checkpoints_topic=settings.checkpoints_topic,
    ) as reporter:  # fmt: skip
        await reporter.run_started(root, num_to_keep=1, checkpoint_score_attribute="acc")
        await reporter.report({"acc": 0.5}, root / "c0")
        watch = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ckptlog.cli", "watch", "piped", *topics,
            cwd=REPO, env={**os.environ, "COLUMNS": "80"},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert watch.stdout is not None
        try:
            first = await _line(watch.stdout)
            assert "run piped: 1 kept · best c0 (acc 0.5) · latest c0 · committed 1" in first, first
            assert first[:4].isdigit() and "Z run piped" in first, "timestamped, for a log file"
            await reporter.report({"acc": 0.9}, root / "c1")
            second = await _line(watch.stdout)
            assert "best c1 (acc 0.9) · latest c1 · committed 2" in second, second
            await reporter.report({"acc": 0.1}, root / "c2")
            third = await _line(watch.stdout)
            assert "2 kept · best c1 (acc 0.9) · latest c2 · committed 3" in third, third
            assert "\x1b" not in first + second + third and "│" not in first + second + third, "plain text"
        finally:
            watch.terminate()
            await watch.wait()
