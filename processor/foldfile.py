"""Folding a file of CloudEvents JSON lines: the engine behind `ckptlog fold`.

Kept apart from the CLI so the benchmark and tests drive exactly the same loop. A shard
`(k, n)` folds only the runs whose id hashes to `k` (see `processor/sharding.py`): runs are
independent, so n shards folded in n processes give the same views as one fold.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Iterable
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

from events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, decode_event
from events.rejections import Rejection
from processor.core.fold import Fold
from processor.core.outputs import Deletion, Effects
from processor.core.state import FoldSettings
from processor.core.view import run_view
from processor.sharding import AMBIGUOUS, route, shard_of


GC_FREEZE_EVERY = 65_536
PARALLEL_FROM_BYTES = 16 * 1024 * 1024


@dataclass(slots=True)
class FoldResult:
    fold: Fold
    rejected: list[dict[str, Any]] = field(default_factory=list)
    evicted: dict[str, list[str]] = field(default_factory=dict)
    deletions: list[Deletion] = field(default_factory=list)
    applied: int = 0
    duplicates: int = 0
    outputs: int = 0
    first_line: dict[str, int] = field(default_factory=dict)  # run id -> line that created it

    def document(self) -> dict[str, Any]:
        """`{"runs": {RUN_ID: VIEW + evicted}, "rejected": [...]}` — the public contract."""
        runs = {}
        for run_id, run in self.fold.runs.items():
            view = run_view(run)
            view["evicted"] = self.evicted.get(run_id, [])
            runs[run_id] = view
        return {"runs": runs, "rejected": self.rejected}


def fold_lines(
    lines: Iterable[bytes],
    settings: FoldSettings | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    shard: tuple[int, int] | None = None,
) -> FoldResult:
    """Fold one event per line; blank lines are skipped, every other line is applied or rejected."""
    result = FoldResult(Fold(settings))
    apply, runs, first_line = result.fold.apply, result.fold.runs, result.first_line
    mine, shards = shard if shard is not None else (0, 1)
    for lineno, raw in enumerate(lines, 1):
        if not lineno % GC_FREEZE_EVERY:
            gc.freeze()  # the kept state is acyclic: stop re-scanning it in every collection
        owner = route(raw, shards) if shards > 1 else mine
        if owner != mine and owner != AMBIGUOUS:
            continue
        if not raw.strip():
            continue
        event = decode_event(raw, max_bytes=max_bytes, max_depth=max_depth)
        if isinstance(event, Rejection):
            if owner == mine or mine == 0:  # an ambiguous line is reported by shard 0 only
                result.rejected.append({"line": lineno, "reason": str(event.reason), "message": event.message})
            continue
        if owner == AMBIGUOUS and shard_of(event.subject, shards) != mine:
            continue
        new_run = event.subject not in runs
        _record(result, lineno, apply(event))
        if new_run and event.subject in runs:
            first_line[event.subject] = lineno
    gc.unfreeze()
    return result


def _record(result: FoldResult, lineno: int, effects: Effects) -> None:
    if effects.rejection is not None:
        result.rejected.append({"line": lineno, "reason": str(effects.rejection.reason),
                                "message": effects.rejection.message})
        return
    result.applied += 1
    result.duplicates += effects.duplicate
    result.outputs += len(effects.outputs)
    for deletion in effects.deletions:
        result.evicted.setdefault(deletion.run_id, []).append(deletion.path)
        result.deletions.append(deletion)


def fold_file(
    path: Path,
    settings: FoldSettings | None = None,
    *,
    workers: int = 1,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> tuple[dict[str, Any], list[Deletion]]:
    """Fold a file, in `workers` processes each owning a shard of the runs; returns the
    document and the deletions. One worker folds in this process."""
    if workers <= 1:
        with path.open("rb") as stream:
            result = fold_lines(stream, settings, max_bytes=max_bytes, max_depth=max_depth)
        return result.document(), result.deletions
    context = multiprocessing.get_context("fork")
    with context.Pool(workers) as pool:
        parts = pool.starmap(_fold_shard, [(str(path), settings, k, workers, max_bytes, max_depth)
                                           for k in range(workers)])
    runs = sorted((entry for part in parts for entry in part[0]), key=lambda entry: entry[0])
    rejected = sorted((r for part in parts for r in part[1]), key=lambda r: int(r["line"]))
    deletions = [d for part in parts for d in part[2]]
    return {"runs": {run_id: view for _, run_id, view in runs}, "rejected": rejected}, deletions


def auto_workers(path: Path) -> int:
    """Processes worth forking: one per core for large files, else one (fork costs ~0.1 s)."""
    if path.stat().st_size < PARALLEL_FROM_BYTES:
        return 1
    return max(1, min(os.cpu_count() or 1, 8))


def _fold_shard(path: str, settings: FoldSettings | None, mine: int, shards: int, max_bytes: int,
                max_depth: int) -> tuple[list[tuple[int, str, dict[str, Any]]], list[dict[str, Any]], list[Deletion]]:
    with open(path, "rb") as stream:
        result = fold_lines(stream, settings, max_bytes=max_bytes, max_depth=max_depth, shard=(mine, shards))
    runs = [(result.first_line.get(run_id, 0), run_id, view) for run_id, view in result.document()["runs"].items()]
    return runs, result.rejected, result.deletions
