"""The console's pages, chart and rules from VIEW dicts: escaping, marks, sorting, paging."""

from __future__ import annotations

import re

from ckptlog.processor.ui import pages
from ckptlog.processor.ui.chart import MAX_POINTS, chart, downsample
from ckptlog.processor.ui.model import PAGE_SIZE, Point, Query, RunLog, metrics_of, points, row_of, select
from tests.unit.ui.fake import log_of, view

HOSTILE = '<script>alert("x")</script>'


def marks_in(svg: str, mark: str) -> set[str]:
    """The data-path of every chart mark carrying `mark` among its classes."""
    found = re.finditer(r'class="mark ([^"]*)" data-path="([^"]*)"', svg)
    return {m.group(2) for m in found if mark in m.group(1).split()}


def test_chart_marks_every_reported_checkpoint_kept_best_latest_evicted_deleted() -> None:
    scores = [0.1, 0.9, 0.5, 0.7, 0.2]
    v = view([("file:///r/c3", 0.7), ("file:///r/c1", 0.9)], latest="file:///r/c4")
    v["checkpoints"][0]["report_index"], v["checkpoints"][1]["report_index"] = 3, 1
    log = log_of(scores, kept={1, 3}, deleted={0})
    found = points(v, log, "acc")
    assert [p.report_index for p in found] == [0, 1, 2, 3, 4]
    svg = chart(found, "acc")
    assert marks_in(svg, "kept") == {"file:///r/c1", "file:///r/c3"}
    assert marks_in(svg, "best") == {"file:///r/c1"}
    assert marks_in(svg, "latest") == {"file:///r/c4"}
    assert marks_in(svg, "evicted") == {"file:///r/c0", "file:///r/c2", "file:///r/c4"}
    assert marks_in(svg, "deleted") == {"file:///r/c0"}


def test_pending_and_preserved_are_marked_and_a_metric_without_value_lies_on_the_axis() -> None:
    v = view([("file:///r/c0", 0.5)])
    v["checkpoints"][0] |= {"status": "PENDING_VALIDATION", "preserved": "steps"}
    found = points(v, RunLog(), "loss")
    assert found[0].marks == ("best", "latest", "pending", "preserved", "kept") and found[0].value is None
    assert "<rect" in chart(found, "loss")


def test_downsampling_keeps_every_kept_point_and_about_the_limit() -> None:
    found = [Point(f"p{i}", i, float(i), ("kept",) if i % 1000 == 0 else ("evicted",)) for i in range(10_000)]
    shown = downsample(found)
    assert len(shown) <= MAX_POINTS + 10
    assert {p.path for p in shown if "kept" in p.marks} == {f"p{i}" for i in range(0, 10_000, 1000)}
    assert 'data-reported="10000"' in chart(found, "acc")


def test_a_hostile_run_id_path_and_metric_render_as_text() -> None:
    v = view([(f"file:///r/{HOSTILE}", 0.5)])
    v["checkpoint_config"]["checkpoint_score_attribute"] = HOSTILE
    log = RunLog()
    html = pages.run_page(
        HOSTILE,
        v,
        points(v, log, HOSTILE),
        metrics_of(v, log),
        HOSTILE,
        [
            {
                "offset": 1,
                "type": "ckptlog.report.v1",
                "effects": [{"kind": "evicted", "path": HOSTILE, "reason": HOSTILE}],
            }
        ],
    )
    rows = [row_of(HOSTILE, v, None, 0)]
    listing = pages.runs_page(rows, 1, Query(q=HOSTILE))
    for page in (html, listing, pages.checkpoint_page(HOSTILE, HOSTILE, {"state": HOSTILE}, HOSTILE)):
        assert "<script>alert" not in page
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
        assert page.count("<script") == 1  # the page's own /static/live.js
    assert pages.run_url(HOSTILE) == "/runs/%3Cscript%3Ealert%28%22x%22%29%3C%2Fscript%3E"


def test_run_page_lists_kept_in_rank_order_and_the_history_with_eviction_reasons() -> None:
    v = view([("file:///r/c3", 0.7), ("file:///r/c1", 0.9)])
    steps = [
        {
            "offset": 7,
            "type": "ckptlog.report.v1",
            "time": None,
            "effects": [
                {"kind": "registered", "path": "file:///r/c2", "report_index": 2},
                {"kind": "evicted", "path": "file:///r/c0", "report_index": 0, "reason": "num_to_keep"},
                {"kind": "watermark", "committed": 3},
            ],
        }
    ]
    html = pages.run_page("r", v, points(v, RunLog(), "acc"), ["acc"], "acc", steps)
    assert html.index("file:///r/c1") < html.index("file:///r/c3", html.index('class="kept"'))
    assert "reason=num_to_keep" in html and "watermark" not in html.split("<h2>History</h2>")[1]
    assert 'href="/runs/r/checkpoints/file%3A%2F%2F%2Fr%2Fc0"' in html


def test_rows_sort_filter_and_page() -> None:
    rows = [row_of(f"run-{i:05d}", view([("p", i / 10_000)]), None, i % 3) for i in range(10_000)]
    page, total = select(rows, Query())
    assert total == 10_000 and len(page) == PAGE_SIZE and page[0].run == "run-00000"
    page, _ = select(rows, Query(sort="score", desc=True, page=2))
    assert page[0].run == "run-09899"
    page, total = select(rows, Query(q="RUN-0001"))
    assert total == 10 and all("run-0001" in r.run for r in page)
    assert Query.parse({"sort": "nonsense", "page": "x"}) == Query()
    html = pages.runs_page(page, total, Query(q="run-0001"))
    assert html.count("<tr data-run=") == 10 and "page 1 of 1" in html


def test_a_run_with_many_kept_checkpoints_and_steps_pages_both_tables() -> None:
    v = view([(f"file:///r/c{i:05d}", i / 1000) for i in range(250)])
    steps = [{"offset": i, "type": "r", "effects": [{"kind": "registered", "path": f"p{i}"}]} for i in range(500)]
    html = pages.run_page("r", v, points(v, RunLog(), "acc"), ["acc"], "acc", steps, (3, 2))
    kept = html.split('class="kept"')[1].split("</table>")[0]
    assert kept.count("<tr data-path=") == 50 and "file:///r/c00049" in kept and "file:///r/c00050" not in kept
    assert "kept page 3 of 3 (250)" in html and "history page 2 of 3 (500)" in html
    history = html.split("<h2>History</h2>")[1]
    assert "@299 " in history and "@300 " not in history and "@99 " not in history
    assert 'href="?metric=acc&amp;history=2&amp;kept=2"' in html
