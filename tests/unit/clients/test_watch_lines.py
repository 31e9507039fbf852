"""`ckptlog watch` without a terminal prints one plain line per change (issue 38 item 4): what the
table says, on one line."""

from __future__ import annotations

from ckptlog.client.table import view_line
from ckptlog.client.views import RunView
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.view import run_view
from tests import factories as f


def _folded(*lines: bytes) -> RunView:
    fold = Fold()
    for line in lines:
        fold.apply(f.event(line))
    return RunView.model_validate(run_view(fold.runs["r"]))


def test_the_line_names_the_kept_the_best_with_its_score_the_latest_and_the_watermarks() -> None:
    view = _folded(
        f.started(keep=1, attr="val/loss", order="min"),
        *(f.report(metrics={"val": {"loss": 1.0 / (i + 1)}}, path=f"file:///data/r/c{i}") for i in range(3)),
    )
    line = view_line("r", view, rejected=2, warned=1)
    assert line.startswith("run r: 1 kept · best c2 (val/loss 0.3333) · latest c2 · committed 3 · validated 3")
    assert "keeps 1 by val/loss (min)" in line and "2 events rejected" in line and "1 warning" in line
    assert "\n" not in line


def test_no_view_yet_says_why_when_events_were_rejected() -> None:
    assert view_line("r", None) == "run r: no view yet (waiting for the processor)"
    assert view_line("r", None, rejected=1).startswith("run r: no view yet — 1 event rejected")
    assert "unreadable state record: bad head · no view yet" in view_line("r", None, problem="bad head")
