"""Warnings reach the sender (issue 21 #4): an event the processor applied with a warning (a missing
score, a validation result for a checkpoint that is not pending) returns the warning with its
confirmation, and `ckptlog rejections --warnings` lists the run's. On main the confirmation said
success and nothing but a `warning` record on the checkpoints topic showed it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptlog import AsyncReporter, ScoreMissingWarning
from ckptlog.cli.main import _register, app
from ckptlog.processor.service.harness import running
from tests.integration.test_processor_e2e import make_settings

pytestmark = pytest.mark.timeout(180)


async def test_a_confirmed_event_returns_its_warnings_and_the_cli_lists_them(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path)
    root = tmp_path / "runs" / "warned"
    async with (
        running(settings),
        AsyncReporter(
            "warned",
            bootstrap_servers=kafka_bootstrap,
            topic=settings.input_topic,
            confirm=True,
            confirm_timeout_s=60,
            processor_group=settings.group_id,
            dlq_topic=settings.dlq_topic,
            checkpoints_topic=settings.checkpoints_topic,
        ) as reporter,
    ):
        started = await reporter.run_started(root, num_to_keep=2, checkpoint_score_attribute="acc")
        with pytest.warns(ScoreMissingWarning, match="no metric 'acc'"):  # the sender is told first
            missing = await reporter.report({"loss": 1.0}, root / "c0")
        scored = await reporter.report({"acc": 0.5}, root / "c1")
        stray = await reporter.validation_result(root / "c9", "VALIDATED", {"acc": 1.0})
    assert started.warnings == () and scored.warnings == ()
    assert [(w.code, w.checkpoint_path) for w in missing.warnings] == [("score_missing", (root / "c0").as_posix())]
    assert "'acc'" in missing.warnings[0].message and missing.warnings[0].offset == missing.offset
    assert [w.code for w in stray.warnings] == ["not_pending"]

    _register()
    env = {"CKPTLOG_CHECKPOINTS_TOPIC": settings.checkpoints_topic, "COLUMNS": "200", "NO_COLOR": "1"}
    args = ["rejections", "warned", "--warnings", "--json", "--bootstrap-servers", kafka_bootstrap]
    result = await asyncio.to_thread(CliRunner().invoke, app, args, env=env)
    assert result.exit_code == 0, result.output
    listed = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(w["code"], w["offset"]) for w in listed] == [
        ("score_missing", missing.offset),
        ("not_pending", stray.offset),
    ]
    table = await asyncio.to_thread(CliRunner().invoke, app, args[:-3] + args[-2:], env=env)
    assert "2 warning(s) of run 'warned'" in table.stdout and "score_missing" in table.stdout
    common = ["--bootstrap-servers", kafka_bootstrap]
    topics = ["--state-topic", settings.state_topic, "--dlq-topic", settings.dlq_topic]
    inspect = ["inspect", "warned", "--json", *topics, *common]
    inspected = await asyncio.to_thread(CliRunner().invoke, app, inspect, env=env)
    assert inspected.exit_code == 0, inspected.output
    assert json.loads(inspected.stdout)["warnings"] == {"warned": 2}
    watch = ["watch", "warned", "--once", *topics, "--checkpoints-topic", settings.checkpoints_topic, *common]
    watched = await asyncio.to_thread(CliRunner().invoke, app, watch, env=env)
    assert watched.exit_code == 0 and "2 warnings:" in watched.stdout, watched.output
