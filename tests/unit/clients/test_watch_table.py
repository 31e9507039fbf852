"""`ckptlog watch`'s table (issue 21 item 9): the score column is the run's own score attribute
(its VIEW's checkpoint_config) unless told otherwise, preserved checkpoints are marked, and the
caption says what the run keeps, the latest and pending ones included."""

from __future__ import annotations

import io

from rich.console import Console

from ckptlog.client.table import run_table
from ckptlog.client.views import RunView
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.view import run_view
from tests import factories as f


def _folded(*lines: bytes) -> RunView:
    fold = Fold()
    for line in lines:
        fold.apply(f.event(line))
    return RunView.model_validate(run_view(fold.runs["r"]))


def _text(view: RunView, score_attribute: str | None = None) -> str:
    console = Console(width=160, record=True, color_system=None, file=io.StringIO())
    console.print(run_table("r", view, score_attribute))
    return console.export_text()


def test_the_score_column_is_the_runs_own_attribute_and_the_caption_says_what_it_keeps() -> None:
    view = _folded(
        f.started(keep=2, attr="val/loss", order="min"),
        *(f.report(metrics={"val": {"loss": 1.0 / (i + 1)}, "acc": i}, path=f"file:///data/r/c{i}") for i in range(4)),
    )
    text = _text(view)
    header = next(line for line in text.splitlines() if "checkpoint" in line and "status" in line)
    assert "val/loss" in header  # the header names the run's score, not its metrics
    assert "0.25" in text and "acc=" not in text
    assert "keeps 2 by val/loss (min), plus the latest, pending and preserved ones" in " ".join(text.split())
    assert "acc" in next(line for line in _text(view, "acc").splitlines() if "status" in line)  # the flag wins


def test_preserved_checkpoints_are_marked_with_their_rule() -> None:
    view = _folded(
        f.line(
            "run_started",
            "r",
            {
                "storage_path": "file:///data/r",
                "checkpoint_config": {"num_to_keep": 1, "checkpoint_score_attribute": "acc", "keep_every_n_steps": 2},
            },
        ),
        *(f.report(metrics={"acc": i}, path=f"file:///data/r/c{i}") for i in range(4)),
    )
    preserved = [c.path for c in view.checkpoints if c.preserved == "steps"]
    assert preserved, view
    rows = [line for line in _text(view).splitlines() if "◆ preserved (steps)" in line]
    assert len(rows) == len(preserved)
    assert all(any(p.rsplit("/", 1)[-1] in row for row in rows) for p in preserved)


def test_a_view_without_checkpoint_config_still_renders() -> None:
    body = _folded(f.started(keep=1, attr="acc"), f.report(metrics={"acc": 1}, path="file:///data/r/c0"))
    old = RunView.model_validate(body.model_dump(exclude={"checkpoint_config"}))
    assert old.checkpoint_config is None
    text = _text(old)
    assert "acc=1" in text and "keeps" not in text
