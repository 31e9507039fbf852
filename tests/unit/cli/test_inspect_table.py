"""`ckptlog inspect`'s table at 80 columns (issue 38 item 8): the run's score has a column, paths
are shown below the run's root (named once) and never cut; --wide shows them in full."""

from __future__ import annotations

import io

from rich.console import Console

from ckptlog.cli.inspect import render
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.view import View, run_view
from tests import factories as f

ROOT = "file:///tmp/ckptlog-demo-k2j3h4/runs/abcd1234-resnet"


def _view() -> View:
    fold = Fold()
    fold.apply(f.event(f.started(root=ROOT, keep=3, attr="eval/acc")))
    for i in range(5):
        metrics = {"eval": {"acc": 0.70 + i / 100}, "loss": 1 / (i + 1), "lr": 0.001, "epoch": i}
        fold.apply(f.event(f.report(metrics=metrics, path=f"{ROOT}/checkpoint_{i:06d}")))
    return run_view(fold.runs["r"])


def _text(width: int, wide: bool = False) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None, record=True)
    render(console, "r", _view(), wide=wide)
    return console.export_text()


def test_at_80_columns_the_score_has_a_column_and_paths_are_whole_below_the_root() -> None:
    text = _text(80)
    assert max(map(len, text.splitlines())) <= 80
    assert f"checkpoints in {ROOT}/" in text and "…" not in text
    header = next(line for line in text.splitlines() if "checkpoint " in line and "status" in line)
    assert "eval/acc" in header
    for i in (2, 3, 4):  # kept: the 3 best by eval/acc
        row = next(line for line in text.splitlines() if f"checkpoint_{i:06d}" in line)
        assert f"{0.70 + i / 100:.4g}" in row and "COMMITTED" in row
    assert "loss=" in text and "acc=" not in text, "the score is in its own column, not again in the metrics"


def test_wide_shows_the_full_paths() -> None:
    text = _text(250, wide=True)
    assert all(f"{ROOT}/checkpoint_{i:06d}" in text for i in (2, 3, 4))
    assert "checkpoints in" not in text
