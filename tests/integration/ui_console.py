"""A processor on fresh topics with a workload folded, and the web console served over them
(in-process, on a free port): what the console tests (HTTP and browser) share."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckptlog.kafka.connection import KafkaConnection
from ckptlog.processor.foldfile import fold_lines
from ckptlog.processor.service.harness import produce_events, running, wait_for_views, workload
from ckptlog.processor.service.settings import ServiceSettings
from ckptlog.processor.ui.server import running as serving
from ckptlog.processor.ui.source import LiveSource
from tests import factories as f
from tests.integration.test_processor_e2e import conn_of, make_dirs, make_settings

HOSTILE = "<script>alert(1)</script>"
TOKEN = "t0ken-for-tests"
NESTED = "nested"  # ranked by `eval/acc`, its metrics `{"eval": {"acc": …}}` (issue 38 item 1)
NESTED_SCORES = [0.7004, 0.7312, 0.7696, 0.7102, 0.7455, 0.7388, 0.7251, 0.7533]


@dataclass
class Console:
    url: str
    settings: ServiceSettings
    conn: KafkaConnection
    lines: list[bytes]
    root: Path

    def folded(self) -> dict[str, Any]:
        """`ckptlog fold` of everything sent so far: run id -> VIEW (with `evicted`)."""
        runs: dict[str, Any] = fold_lines(self.lines, self.settings.fold_settings()).document()["runs"]
        return runs

    async def send(self, lines: list[bytes]) -> None:
        make_dirs(lines)
        self.lines.extend(lines)
        await produce_events(self.conn, self.settings.input_topic, lines)

    async def settled(self) -> None:
        expected = {run: {k: v for k, v in view.items() if k != "evicted"} for run, view in self.folded().items()}
        views = await wait_for_views(self.conn, self.settings.state_topic, expected)
        assert views == expected


def hostile_run(root: Path) -> list[bytes]:
    home = root / "hostile"
    return [
        f.started(HOSTILE, home.as_uri(), keep=1, attr="acc"),
        f.report(HOSTILE, {"acc": 0.5}, (home / "c0").as_uri()),
    ]


def nested_run(root: Path) -> list[bytes]:
    home = root / NESTED
    lines = [f.started(NESTED, home.as_uri(), keep=3, attr="eval/acc")]
    for i, score in enumerate(NESTED_SCORES):
        metrics = {"eval": {"acc": score, "loss": round(1 - score, 4)}, "step": i}
        lines.append(f.report(NESTED, metrics, (home / f"ckpt-{i:03d}").as_uri()))
    return lines


@contextlib.asynccontextmanager
async def console(
    topic_factory: Any, bootstrap: str, tmp_path: Path, token: str | None = None, reports: int = 40
) -> AsyncIterator[Console]:
    settings = await make_settings(topic_factory, bootstrap, tmp_path)
    root = tmp_path / "runs"
    lines = workload(root.as_uri(), runs=3, reports=reports, keep=2) + hostile_run(root) + nested_run(root)
    async with running(settings):
        shown = Console("", settings, conn_of(settings), [], root)
        await shown.send(lines)
        await shown.settled()
        source = LiveSource(settings)
        await source.start()
        try:
            async with serving(source, token=token) as url:
                shown.url = url
                yield shown
        finally:
            await source.close()
