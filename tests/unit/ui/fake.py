"""A `Source` from VIEW dicts and run logs, for the console's unit tests (no broker)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from ckptlog.processor.ui.model import RunLog, View


class FakeSource:
    def __init__(self, views: dict[str, View], logs: dict[str, RunLog] | None = None) -> None:
        self._views, self.logs = views, logs or {}
        self.rejected: dict[str, int] = {}
        self.steps: dict[str, list[dict[str, Any]]] = {}
        self.changed: asyncio.Queue[list[str]] = asyncio.Queue()

    def views(self) -> dict[str, View]:
        return dict(self._views)

    def log(self, run: str) -> RunLog | None:
        return self.logs.get(run)

    def rejections(self, run: str) -> int:
        return self.rejected.get(run, 0)

    async def refresh(self) -> None:
        return None

    async def history(self, run: str) -> list[dict[str, Any]] | None:
        return self.steps.get(run)

    async def explain(self, run: str, path: str) -> tuple[dict[str, Any], str]:
        return {"run_id": run, "path": path, "state": "evicted"}, f"checkpoint {path} of {run}: EVICTED."

    async def changes(self) -> AsyncIterator[list[str]]:
        while True:
            yield await self.changed.get()


def view(paths: list[tuple[str, float]], latest: str | None = None, **extra: Any) -> View:
    """A VIEW keeping `paths` (sort order, best last) scored by `acc`."""
    checkpoints = [
        {"path": p, "metrics": {"acc": s}, "status": "VALIDATED", "report_index": i} for i, (p, s) in enumerate(paths)
    ]
    return {
        "checkpoints": checkpoints,
        "latest": latest or (paths[-1][0] if paths else None),
        "best": paths[-1][0] if paths else None,
        "committed": len(paths),
        "validated": len(paths),
        "generation": 0,
        "index_in_generation": len(paths),
        "checkpoint_config": {"num_to_keep": 2, "checkpoint_score_attribute": "acc", "checkpoint_score_order": "max"},
        **extra,
    }


def log_of(
    scores: list[float],
    kept: set[int],
    deleted: set[int] = frozenset(),  # type: ignore[assignment]
    root: str = "file:///r/",
) -> RunLog:
    """A run that reported c0..cN (below `root`) with `scores`; those not in `kept` evicted."""
    log = RunLog()
    for i, score in enumerate(scores):
        path = f"{root}c{i}"
        log.take(
            "checkpoint_registered",
            {"checkpoint_path": path, "report_index": i, "metrics": {"acc": score}, "status": "VALIDATED"},
            1_700_000_000_000 + i,
        )
        if i not in kept:
            log.take("checkpoint_evicted", {"checkpoint_path": path, "report_index": i, "reason": "num_to_keep"}, None)
    if deleted:
        log.take("checkpoints_deleted", {"checkpoint_paths": [f"{root}c{i}" for i in deleted]}, None)
    return log
