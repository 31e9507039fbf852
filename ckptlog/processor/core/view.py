"""The run VIEW: the public JSON shape shared by `ckptlog fold`, inspect, the state topic
and readers (kept checkpoints in sort order, best last; latest; best; watermarks). Its
contract is ckptlog/events/view.py."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec

from ckptlog.events.decoded import CheckpointConfig
from ckptlog.processor.core.state import RunState

View = dict[str, Any]


@lru_cache(maxsize=1024)
def _config_entry(config: CheckpointConfig) -> dict[str, Any]:
    """The run's retention as run_started spells it (the beyond-Ray keys only when set): a run's
    config changes at most at run_started, so views share one encoding per config."""
    return {k: v for k, v in msgspec.structs.asdict(config).items() if v is not None or k in _RAY_KEYS}


_RAY_KEYS = frozenset({"num_to_keep", "checkpoint_score_attribute", "checkpoint_score_order"})


def config_entry(run: RunState) -> dict[str, Any]:
    return dict(_config_entry(run.config))  # a copy: a view is the caller's to change


def run_view(run: RunState) -> View:
    checkpoints = [
        {"path": r.path, "metrics": r.metrics, "status": r.status, "report_index": r.report_index}
        for r in run.checkpoints
    ]
    if run.preserved_count:  # retention beyond Ray: mark what is kept for good (absent on the others)
        for entry, record in zip(checkpoints, run.checkpoints, strict=True):
            if record.preserved is not None:
                entry["preserved"] = record.preserved
    view = {
        "checkpoints": checkpoints,
        "latest": run.latest.path if run.latest is not None else None,
        "best": checkpoints[-1]["path"] if checkpoints else None,
        "committed": run.report_count,
        "validated": run.validated,
        "generation": run.generation,
        "index_in_generation": run.index_in_generation,
        "checkpoint_config": config_entry(run),
    }
    if run.finished is not None:  # its final VIEW (contract §4): absent while the run goes on
        view["finished"] = True
    if run.reopened:  # the run's epoch (contract §3 "Reopened runs"): absent until its first reopen
        view["reopened"] = run.reopened
    return view


def view_head(run: RunState, span: int) -> View:
    """The VIEW of a run whose kept checkpoints are published in pages of `span` report indices:
    the same fields, `checkpoints` empty, and `pages` saying how to find them. O(1), not O(kept)."""
    best = run.checkpoints.last()
    head: View = {
        "checkpoints": [],
        "latest": run.latest.path if run.latest is not None else None,
        "best": best.path if best is not None else None,
        "committed": run.report_count,
        "validated": run.validated,
        "generation": run.generation,
        "index_in_generation": run.index_in_generation,
        "checkpoint_config": config_entry(run),
        "pages": {"span": span},
    }
    if run.finished is not None:
        head["finished"] = True
    if run.reopened:
        head["reopened"] = run.reopened
    return head
