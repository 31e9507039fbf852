"""Folding a file of CloudEvents JSON lines: the engine behind `ckptlog fold`.

Kept apart from the CLI so the benchmark and tests drive exactly the same loop.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, decode_event
from events.rejections import Rejection
from processor.core.fold import Fold
from processor.core.outputs import Deletion
from processor.core.state import FoldSettings
from processor.core.view import run_view


GC_FREEZE_EVERY = 65_536


@dataclass(slots=True)
class FoldResult:
    fold: Fold
    rejected: list[dict[str, Any]] = field(default_factory=list)
    evicted: dict[str, list[str]] = field(default_factory=dict)
    deletions: list[Deletion] = field(default_factory=list)
    applied: int = 0
    duplicates: int = 0
    outputs: int = 0

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
) -> FoldResult:
    """Fold one event per line; blank lines are skipped, every other line is applied or rejected."""
    result = FoldResult(Fold(settings))
    apply = result.fold.apply
    for lineno, raw in enumerate(lines, 1):
        if not lineno % GC_FREEZE_EVERY:
            gc.freeze()  # the kept state is acyclic: stop re-scanning it in every collection
        if not raw.strip():
            continue
        event = decode_event(raw, max_bytes=max_bytes, max_depth=max_depth)
        if isinstance(event, Rejection):
            result.rejected.append({"line": lineno, "reason": str(event.reason), "message": event.message})
            continue
        effects = apply(event)
        if effects.rejection is not None:
            result.rejected.append({"line": lineno, "reason": str(effects.rejection.reason),
                                    "message": effects.rejection.message})
            continue
        result.applied += 1
        result.duplicates += effects.duplicate
        result.outputs += len(effects.outputs)
        for deletion in effects.deletions:
            result.evicted.setdefault(deletion.run_id, []).append(deletion.path)
            result.deletions.append(deletion)
    gc.unfreeze()
    return result
