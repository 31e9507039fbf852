"""`ckptlog watch --limit` and `ckptlog inspect --checkpoints`: a run keeping thousands of
checkpoints stays readable (issue 24 item 5): the best-ranked N and the latest are shown, a row
counts the rest; `inspect --json` still has every one (the VIEW is a public contract)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ckptlog.cli import watching
from ckptlog.cli.main import _register, app
from ckptlog.client.errors import ClientError
from ckptlog.client.table import rows_shown, run_table
from ckptlog.client.views import RunView
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.view import View, run_view
from ckptlog.processor.service.views import StateRead
from tests import factories as f

_register()
KEPT = 30
_ENV = {"COLUMNS": "200"}  # rich's width: no cell wraps


def _view(run: str = "r") -> View:
    """`run` keeping all of KEPT checkpoints, ranked by acc; its latest (the last reported) ranks lowest."""
    fold = Fold()
    fold.apply(f.event(f.started(run, root=f"file:///data/{run}", attr="acc")))
    for i in range(KEPT):
        fold.apply(f.event(f.report(run, metrics={"acc": KEPT - i}, path=f"file:///data/{run}/ckpt-{i:02d}")))
    return run_view(fold.runs[run])


def test_rows_shown_are_the_best_ranked_and_the_latest() -> None:
    paths = [f"p{i}" for i in range(50)]  # best last
    assert rows_shown(paths, "p3", 5) == ([3, 45, 46, 47, 48, 49], 44)
    assert rows_shown(paths, "p47", 5) == ([45, 46, 47, 48, 49], 45)
    assert rows_shown(paths, None, 0) == (list(range(50)), 0)
    assert rows_shown(paths[:4], "p3", 5) == ([0, 1, 2, 3], 0)


def test_the_view_orders_the_latest_first_here() -> None:
    view = _view()
    assert view["latest"] == view["checkpoints"][0]["path"] == "file:///data/r/ckpt-29"
    assert view["best"] == view["checkpoints"][-1]["path"] == "file:///data/r/ckpt-00"


def _inspect(monkeypatch: pytest.MonkeyPatch, *args: str) -> Any:
    views = {run: _view(run) for run in ("a-1", "a-2", "b-1")}

    async def read_state(conn: Any, settings: Any, runs: list[str]) -> tuple[StateRead, Counter[str], Counter[str]]:
        return StateRead({r: v for r, v in views.items() if not runs or r in runs}), Counter(), Counter()

    monkeypatch.setattr("ckptlog.cli.inspect.read_state", read_state)
    return CliRunner().invoke(app, ["inspect", "--bootstrap-servers", "127.0.0.1:1", *args], env=_ENV)


def test_inspect_shows_the_best_ranked_checkpoints_and_counts_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    result = _inspect(monkeypatch, "a-1", "--checkpoints", "5")
    assert result.exit_code == 0, result.output
    assert "… and 24 more kept checkpoints, lower ranked (--checkpoints 0 shows all)" in result.stdout
    shown = {i for i in range(KEPT) if f"ckpt-{i:02d}" in result.stdout}  # below "checkpoints in file:///data/a-1/"
    assert shown == {0, 1, 2, 3, 4, 29}  # the 5 best and the latest
    every = _inspect(monkeypatch, "a-1", "--checkpoints", "0")
    assert "more kept" not in every.stdout and all(f"ckpt-{i:02d}" in every.stdout for i in range(KEPT))
    default = _inspect(monkeypatch, "a-1")
    assert f"… and {KEPT - 21} more kept checkpoints" in default.stdout


def test_inspect_json_keeps_every_checkpoint_and_the_view_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    result = _inspect(monkeypatch, "--json", "--checkpoints", "5", "--prefix", "a-")
    body = json.loads(result.stdout)
    assert sorted(body["runs"]) == ["a-1", "a-2"]
    assert body["runs"]["a-1"] == _view("a-1") and len(body["runs"]["a-1"]["checkpoints"]) == KEPT


def test_inspect_prefix_and_limit_page_the_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    result = _inspect(monkeypatch, "--prefix", "a-", "--limit", "1", "--checkpoints", "1")
    assert result.exit_code == 0, result.output
    assert "run a-1" in result.stdout and "run a-2" not in result.stdout and "run b-1" not in result.stdout
    assert "... and 1 more runs: narrow with --prefix, or --limit 0 for all of them" in result.stderr


def _watch(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[Any, dict[str, Any]]:
    """`ckptlog watch` with the state topic's reader replaced by the VIEW of `_view`."""
    seen: dict[str, Any] = {}

    async def watch(console: Any, run_id: str, score: str | None, once: bool, *rest: Any, limit: int = 0) -> None:
        seen.update(run_id=run_id, once=once, limit=limit)
        console.print(run_table(run_id, RunView.model_validate(_view(run_id)), score, limit=limit))

    monkeypatch.setattr("ckptlog.cli.watching.watch", watch)
    argv = ["watch", "r", "--once", "--bootstrap-servers", "127.0.0.1:1", *args]
    return CliRunner().invoke(app, argv, env=_ENV), seen


def test_watch_limit_shows_the_top_n_and_and_m_more(monkeypatch: pytest.MonkeyPatch) -> None:
    result, seen = _watch(monkeypatch, "--limit", "3")
    assert result.exit_code == 0, result.output
    assert seen == {"run_id": "r", "once": True, "limit": 3}
    assert "… and 26 more kept checkpoints, lower ranked (--limit 0 shows all)" in result.stdout
    assert {i for i in range(KEPT) if f"ckpt-{i:02d}" in result.stdout} == {0, 1, 2, 29}
    assert "★ best" in result.stdout and "● latest" in result.stdout
    every, seen = _watch(monkeypatch, "--limit", "0")
    assert seen["limit"] == 0 and "more kept" not in every.stdout
    assert all(f"ckpt-{i:02d}" in every.stdout for i in range(KEPT))
    _, seen = _watch(monkeypatch)
    assert seen["limit"] == 20  # the default: a terminal's worth


class _Feed:
    """A dead-letter or warning feed that has read its topic: `counts` per run."""

    def __init__(self, **counts: int) -> None:
        self.counts, self.letters = Counter(counts), {}

    async def catch_up(self) -> None:
        return None


def test_watch_once_reads_the_run_alone_and_limits_its_table(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[list[str]] = []

    async def read_state_topic(conn: Any, topic: str, runs: list[str]) -> StateRead:
        asked.append(list(runs))
        return StateRead({"r": _view("r")} if runs == ["r"] else {})

    monkeypatch.setattr(watching, "read_state_topic", read_state_topic)
    console = Console(width=200, record=True, color_system=None)
    feed, warned = _Feed(r=2), _Feed()
    asyncio.run(watching._once(console, "r", None, Any, "state", feed, warned, 4))  # type: ignore[arg-type]
    text = console.export_text()
    assert asked == [["r"]]
    assert "… and 25 more kept checkpoints" in text and "2 events rejected" in text
    with pytest.raises(ClientError, match="no view of run 'gone' on state; check the run id"):
        asyncio.run(watching._once(console, "gone", None, Any, "state", _Feed(), _Feed(), 4))  # type: ignore[arg-type]
