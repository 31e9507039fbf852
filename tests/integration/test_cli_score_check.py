"""Issue 38 item 5 on a real broker and processor: `ckptlog report RUN -m scroe=0.99 --checkpoint …`
warns, naming the metric it should have been (the run's score attribute, read from its VIEW); with
--strict it sends nothing and exits 1; --confirm --strict exits 1 for a warning of the processor.
The Python Reporter warns alike."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from ckptlog import AsyncReader, AsyncReporter, ScoreMissingWarning, Topics
from ckptlog.cli.main import _register, app
from ckptlog.processor.service.harness import running
from ckptlog.processor.service.settings import ServiceSettings
from tests.integration.test_processor_e2e import make_settings

pytestmark = pytest.mark.timeout(180)


def _cli(settings: ServiceSettings, *args: str) -> Result:
    _register()
    common = ["--bootstrap-servers", str(settings.bootstrap_servers), "--topic", settings.input_topic]
    common += ["--dlq-topic", settings.dlq_topic, "--processor-group", settings.group_id]
    env = {"COLUMNS": "250", "NO_COLOR": "1", "CKPTLOG_CHECKPOINTS_TOPIC": settings.checkpoints_topic}
    env["CKPTLOG_STATE_TOPIC"] = settings.state_topic  # the topics a --config file would name
    return CliRunner().invoke(app, [*args, *common], env=env)


async def _committed(settings: ServiceSettings, run_id: str) -> int:
    async with AsyncReader(
        bootstrap_servers=settings.bootstrap_servers, topics=Topics(state=settings.state_topic)
    ) as r:
        view = await r.view(run_id)
    assert view is not None
    return view.committed


async def test_a_misspelled_score_warns_with_the_right_name_and_strict_refuses_it(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path)
    root = tmp_path / "runs" / "typo"
    for name in ("c0", "c1", "c2", "c3"):
        (root / name).mkdir(parents=True)
    async with running(settings):
        started = await asyncio.to_thread(
            _cli, settings, "start-run", "typo", str(root), "--keep", "1", "--score-attribute", "score", "--confirm"
        )
        assert started.exit_code == 0, started.output
        good = await asyncio.to_thread(
            _cli, settings, "report", "typo", "-m", "score=0.5", "--checkpoint", f"{root}/c0"
        )
        assert good.exit_code == 0 and "warning" not in good.stderr, good.output

        typo = ["report", "typo", "-m", "scroe=0.99", "--checkpoint", f"{root}/c1"]
        warned = await asyncio.to_thread(_cli, settings, *typo, "--confirm")
        assert warned.exit_code == 0, warned.output  # applied, as before: a warning, not an error
        assert "warning score_missing: report of run 'typo' has no metric 'score'" in warned.stderr
        assert "did you mean 'score' instead of 'scroe'?" in warned.stderr
        assert warned.stderr.count("score_missing") == 1, "the processor's own warning is not said twice"
        assert await _committed(settings, "typo") == 2

        strict = ["report", "typo", "-m", "scroe=0.98", "--checkpoint", f"{root}/c2", "--confirm", "--strict"]
        refused = await asyncio.to_thread(_cli, settings, *strict)
        assert refused.exit_code == 1 and "not sent (--strict" in refused.stderr, refused.output
        assert "did you mean 'score' instead of 'scroe'?" in refused.stderr and refused.stdout == ""
        assert await _committed(settings, "typo") == 2, "nothing was sent"

        not_a_number = ["report", "typo", "-m", "score=high", "--checkpoint", f"{root}/c3", "--confirm", "--strict"]
        applied = await asyncio.to_thread(_cli, settings, *not_a_number)
        assert applied.exit_code == 1, applied.output
        assert "warning score_not_numeric:" in applied.stderr and "applied with 1 warning (--strict)" in applied.stderr

        async with AsyncReporter(
            "typo", bootstrap_servers=kafka_bootstrap, topic=settings.input_topic, state_topic=settings.state_topic
        ) as reporter:  # a reporter that did not send run_started: the attribute comes from the VIEW
            with pytest.warns(ScoreMissingWarning, match="did you mean 'score' instead of 'scroe'"):
                await reporter.report({"scroe": 0.5}, root / "c3", index=9)
