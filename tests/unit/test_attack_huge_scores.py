"""Issue 42 items 1-2: a score beyond a float's range (`{"acc": 10**400}`, -10**400, nested in
metrics) is a valid score the fold compares exactly (contract §3); no reader fails on it. The
console (runs page, run page, checkpoint page, JSON), `explain`, `history`, `inspect`, `watch` and
the client's tables turn it into text through one place, `ckptlog.events.numbers`."""

from __future__ import annotations

import io
import json
from urllib.parse import quote

import aiohttp
from rich.console import Console

from ckptlog.cli.history import step_line
from ckptlog.cli.inspect import render
from ckptlog.client.table import run_table
from ckptlog.client.views import RunView
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.view import run_view
from ckptlog.processor.explain.checkpoint import explain, paragraph
from ckptlog.processor.ui.chart import chart
from ckptlog.processor.ui.model import points, row_of
from ckptlog.processor.ui.screenshots import StaticSource
from ckptlog.processor.ui.server import running
from tests import factories as f

BIG, SMALL = 10**400, -(10**400)
ROOT = "file:///data"


def hostile_lines() -> list[bytes]:
    """Run `huge` keeps 1 by acc: c0 scores 10**400 (the best), c1 -10**400 (evicted by c2), c2 0.5
    (the latest). Run `nested` ranks by eval/acc with the huge ints nested. Run `ok` is ordinary."""
    return [
        f.started("huge", f"{ROOT}/huge", keep=1, attr="acc"),
        f.report("huge", {"acc": BIG}, f"{ROOT}/huge/c0"),
        f.report("huge", {"acc": SMALL}, f"{ROOT}/huge/c1"),
        f.report("huge", {"acc": 0.5, "step": BIG}, f"{ROOT}/huge/c2"),
        f.started("nested", f"{ROOT}/nested", keep=1, attr="eval/acc", order="min"),
        f.report("nested", {"eval": {"acc": BIG, "loss": SMALL}}, f"{ROOT}/nested/c0"),
        f.report("nested", {"eval": {"acc": SMALL}}, f"{ROOT}/nested/c1"),
        f.report("nested", {"eval": {"acc": 1}}, f"{ROOT}/nested/c2"),
        f.started("ok", f"{ROOT}/ok", keep=1, attr="acc"),
        f.report("ok", {"acc": 0.25}, f"{ROOT}/ok/c0"),
    ]


async def test_the_console_answers_every_page_of_a_run_scored_beyond_a_float() -> None:
    source = StaticSource(hostile_lines())
    async with running(source) as url, aiohttp.ClientSession() as http:
        async with http.get(url + "/") as answer:
            text = await answer.text()
            assert answer.status == 200, text
            assert "<td>1e+400</td>" in text and "<td>-1e+400</td>" in text and "/runs/ok" in text
        for run in ("huge", "nested"):
            async with http.get(f"{url}/runs/{run}") as answer:
                text = await answer.text()
                assert answer.status == 200, text
                assert 'data-value="1e+400"' in text and 'data-value="-1e+400"' in text
        evicted = quote(f"{ROOT}/huge/c1", safe="")
        async with http.get(f"{url}/runs/huge/checkpoints/{evicted}") as answer:
            text = await answer.text()
            assert answer.status == 200, text
            assert "score -1e+400; the worst kept scored 1e+400" in text
        async with http.get(url + "/api/runs/huge") as answer:
            view = json.loads(await answer.text())
            assert answer.status == 200 and view["checkpoints"][-1]["metrics"] == {"acc": BIG}  # exact on the wire


def test_runs_sort_by_the_exact_score_and_the_chart_places_it() -> None:
    source = StaticSource(hostile_lines())
    rows = {run: row_of(run, view, source.log(run), 0) for run, view in source.views().items()}
    assert rows["huge"].score == BIG and rows["nested"].score == SMALL  # exact, not a float
    found = points(source.views()["huge"], source.log("huge"), "acc")  # type: ignore[arg-type]
    assert [p.text for p in found] == ["1e+400", "-1e+400", "0.5"]
    svg = chart(found, "acc")
    assert svg.count("<circle") == 3  # all three placed on the axis, none as "no value"


def test_explain_and_history_text_of_a_checkpoint_evicted_with_a_huge_score() -> None:
    source = StaticSource(hostile_lines())
    steps = source.replay.steps["huge"]
    doc = explain("huge", f"{ROOT}/huge/c1", steps, source.replay.state("huge"))
    assert doc["state"] == "evicted" and doc["evicted"]["reason"]["score"] == SMALL
    assert "(score -1e+400; the worst kept scored 1e+400)" in paragraph(doc)
    lines = [step_line(step) for step in steps]
    assert any("score -1e+400" in line for line in lines), lines


def _folded(lines: list[bytes], run: str) -> RunView:
    fold = Fold()
    for line in lines:
        fold.apply(f.event(line))
    return RunView.model_validate(run_view(fold.runs[run]))


def test_inspect_and_watch_tables_show_a_huge_score() -> None:
    lines = hostile_lines()
    for run in ("huge", "nested"):
        view = _folded(lines, run)
        console = Console(width=200, record=True, color_system=None, file=io.StringIO())
        console.print(run_table(run, view, None))
        render(console, run, view.model_dump(mode="json"))
        text = console.export_text()
        assert "1e+400" in text, text
        assert "1" + "0" * 30 not in text  # never 401 digits


def test_a_views_json_dump_keeps_what_the_topic_holds() -> None:
    """The client's VIEW dumped as JSON (`model_dump(mode="json")`: what the live console and the
    whole-system test read) is the fold's VIEW: a kept NaN stays NaN (pydantic's default writes
    null), a huge int stays exact. Found by system_hostile.huge_scores."""
    lines = [f.started("r", f"{ROOT}/r", keep=1, attr="acc")]
    lines += [f.report("r", {"acc": s, "n": BIG}, f"{ROOT}/r/c{i}") for i, s in enumerate([BIG, 0.5, float("nan")])]
    fold = Fold()
    for line in lines:
        fold.apply(f.event(line))
    view = run_view(fold.runs["r"])
    dumped = RunView.model_validate(view).model_dump(mode="json")
    assert json.dumps(dumped, allow_nan=True, sort_keys=True) == json.dumps(view, allow_nan=True, sort_keys=True)
    assert "NaN" in RunView.model_validate(view).model_dump_json()
