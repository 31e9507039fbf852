"""The simulated training job: real checkpoint directories on disk, reported through AsyncReporter."""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections.abc import Callable
from pathlib import Path

from ckptlog.client.reporter import AsyncReporter
from ckptlog.demo.plan import RunPlan

Tick = Callable[[str, str], None]
"""Called with (run id, what happened) after each event, for the display."""


def file_url(path: Path) -> str:
    return "file://" + str(path.resolve())


def save_checkpoint(run_dir: Path, step: int, quality: float) -> Path:
    """What a framework's `save` would do: a directory holding the weights (here: a tiny JSON)."""
    directory = run_dir / f"ckpt-{step:03d}"
    directory.mkdir(parents=True, exist_ok=False)
    (directory / "model.json").write_text(json.dumps({"step": step, "quality": quality}))
    return directory


def metrics_for(plan: RunPlan, step: int, quality: float, rng: random.Random) -> dict[str, float | int]:
    loss = max(0.01, 2.0 * (1.0 - quality) + rng.gauss(0, 0.05))
    if plan.score_order == "min" and step == 7:
        loss = math.nan  # a diverging step: data, not an error (it ranks last)
    return {
        "step": step,
        "loss": round(loss, 4) if not math.isnan(loss) else loss,
        "val_acc": round(quality + rng.gauss(0, 0.02), 4),
    }


async def train(
    plan: RunPlan, reporter: AsyncReporter, storage: Path, reports: int, seed: int, pace_s: float, tick: Tick
) -> None:
    """`reports` steps; each may save a checkpoint, ask for validation or restart the worker group."""
    rng = random.Random(f"{seed}:{plan.name}")
    run_dir = storage / plan.name
    run_dir.mkdir(parents=True, exist_ok=True)
    await reporter.run_started(
        file_url(run_dir),
        plan.keep,
        plan.score_attribute,
        plan.score_order,
        validation={"fn_kwargs": {"dataset": "val", "seed": seed}, "timeout_s": plan.timeout_s},
    )
    tick(plan.run_id, "started")
    quality = 0.55 + rng.uniform(-0.05, 0.05)
    for step in range(reports):
        await asyncio.sleep(pace_s * rng.uniform(0.5, 1.5))
        quality = min(0.97, quality + rng.uniform(-0.015, 0.03))
        path = save_checkpoint(run_dir, step, quality) if plan.has_checkpoint(step) else None
        validate = path is not None and plan.validates(step)
        await reporter.report(metrics_for(plan, step, quality, rng), file_url(path) if path else None, validate)
        tick(plan.run_id, "report")
        if plan.restart_at == step + 1:
            await reporter.worker_group_restart(2, reason="simulated node failure")
            tick(plan.run_id, "restart")
    tick(plan.run_id, "done")
