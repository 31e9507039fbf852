"""`python -m ckptlog.processor.ui.screenshots`: docs/ui-runs.png and docs/ui-run.png, the console over a
generated workload (the harness's, its metrics made to look like training's, folded in memory: no
broker), shot with the system chromium.

`StaticSource` is the console's `Source` over a fold of input lines, so the pictures show what
`ckptlog ui` shows for the same log (their history and explanations come from the same replay
`ckptlog history` does).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckptlog.events.outputs import CHECKPOINT_EVICTED, CHECKPOINT_REGISTERED, CHECKPOINTS_DELETED
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.explain.checkpoint import explain, paragraph
from ckptlog.processor.explain.run_replay import RunReplay
from ckptlog.processor.foldfile import fold_lines
from ckptlog.processor.service.harness import workload
from ckptlog.processor.ui.model import RunLog, View
from ckptlog.processor.ui.server import running

CHROMIUM = "/usr/bin/chromium"
DOCS = Path(__file__).resolve().parents[3] / "docs"


@dataclass(frozen=True)
class Line:
    key: bytes | None
    value: bytes | None
    offset: int
    timestamp: int | None


def _logs(lines: list[bytes], replay: RunReplay) -> dict[str, RunLog]:
    """Each run's RunLog, as the checkpoints topic would hold it."""
    metrics = {}
    for line in lines:
        body = json.loads(line)
        checkpoint = body["data"].get("checkpoint") if body["type"] == "ckptlog.report.v1" else None
        if checkpoint:
            metrics[checkpoint["path"]] = body["data"]["metrics"]
    logs: dict[str, RunLog] = {}
    for run, steps in replay.steps.items():
        log = logs.setdefault(run, RunLog())
        for step in steps:
            for effect in step.effects:
                if effect["kind"] == "registered":
                    data = {"checkpoint_path": effect["path"], "metrics": metrics.get(effect["path"], {})}
                    log.take(CHECKPOINT_REGISTERED.name, data | {"report_index": effect["report_index"]}, None)
                elif effect["kind"] == "evicted":
                    log.take(
                        CHECKPOINT_EVICTED.name, {"checkpoint_path": effect["path"], "reason": effect["reason"]}, None
                    )
                elif effect["kind"] == "deleted":
                    log.take(CHECKPOINTS_DELETED.name, {"checkpoint_paths": [effect["path"]]}, None)
    return logs


def training_like(lines: list[bytes], seed: int = 3) -> list[bytes]:
    """`lines` with the metrics a training run reports: `eval/acc` (nested, as many frameworks
    report it, and the runs rank by it) rising towards a ceiling with noise, `loss` falling."""
    rng = random.Random(seed)
    seen: dict[str, int] = {}
    ceiling: dict[str, float] = {}
    reported: dict[str, dict[str, Any]] = {}
    out = []
    for line in lines:
        body = json.loads(line)
        data, run = body["data"], body["subject"]
        if body["type"] == "ckptlog.run_started.v1":
            data["checkpoint_config"]["checkpoint_score_attribute"] = "eval/acc"
            ceiling[run] = 0.82 + 0.12 * rng.random()
        elif body["type"] == "ckptlog.report.v1":
            step = seen[run] = seen.get(run, -1) + 1
            acc = ceiling[run] - 0.4 * math.exp(-step / 10) + rng.gauss(0, 0.015)
            data["metrics"] = {"step": step, "loss": round(2.2 * (1 - acc), 4), "eval": {"acc": round(acc, 4)}}
            reported[data["checkpoint"]["path"]] = data["metrics"]["eval"]
        elif body["type"] == "ckptlog.validation_result.v1":
            data["metrics"] = {"eval": reported[data["checkpoint_path"]]}  # what the evaluator measured
        out.append(json.dumps(body, separators=(",", ":")).encode())
    return out


class StaticSource:
    def __init__(self, lines: list[bytes], settings: FoldSettings | None = None) -> None:
        settings = settings or FoldSettings()
        self._views: dict[str, View] = {
            run: {k: v for k, v in view.items() if k != "evicted"}
            for run, view in fold_lines(lines, settings).document()["runs"].items()
        }
        self.replay = RunReplay(settings, self._views, whole=True)
        self.replay.feed(Line(json.loads(x)["subject"].encode(), x, i, None) for i, x in enumerate(lines))
        self.logs = _logs(lines, self.replay)

    def views(self) -> dict[str, View]:
        return self._views

    def log(self, run: str) -> RunLog | None:
        return self.logs.get(run)

    def rejections(self, run: str) -> int:
        return 0

    async def refresh(self) -> None:
        return None

    async def history(self, run: str) -> list[dict[str, Any]] | None:
        return [step.to_json() for step in self.replay.steps.get(run, [])]

    async def explain(self, run: str, path: str) -> tuple[dict[str, Any], str]:
        doc = explain(run, path, self.replay.steps.get(run, []), self.replay.state(run))
        return doc, paragraph(doc)

    async def changes(self) -> AsyncIterator[list[str]]:
        await asyncio.Event().wait()
        yield []


async def shoot(out: Path = DOCS) -> list[Path]:
    from playwright.async_api import async_playwright

    source = StaticSource(training_like(workload("file:///data/runs", runs=8, reports=480, keep=3, seed=3)))
    shots = [(out / "ui-runs.png", "/"), (out / "ui-run.png", "/runs/run-1")]
    async with running(source) as url, async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            for path, where in shots:
                await page.goto(url + where)
                if where != "/":  # the tooltip a pointer on the best checkpoint shows
                    await page.locator("svg.chart .mark.best").hover()
                    await page.locator(".plot .tip").wait_for(state="visible")
                await page.screenshot(path=str(path), full_page=where == "/")
        finally:
            await browser.close()
    return [path for path, _ in shots]


if __name__ == "__main__":
    for written in asyncio.run(shoot(Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS)):
        print(f"wrote {written}")
