"""The run VIEW: the public JSON shape shared by `ckptlog fold`, inspect, the state topic
and readers (kept checkpoints in sort order, best last; latest; best; watermarks). Its
contract is events/view.py."""

from __future__ import annotations

from typing import Any

from processor.core.state import RunState

View = dict[str, Any]


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
    }
    if run.finished is not None:  # its final VIEW (contract §4): absent while the run goes on
        view["finished"] = True
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
        "pages": {"span": span},
    }
    if run.finished is not None:
        head["finished"] = True
    return head
