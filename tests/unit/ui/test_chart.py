"""Issue 38 item 2: a chart people read at a glance — nice ticks and a grid, a line through the
values, a legend only for marks it shows, a sparkline per run, paths shortened to the run's root."""

from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ckptlog.processor.ui import pages
from ckptlog.processor.ui.axes import axis
from ckptlog.processor.ui.chart import chart, legend, sparkline
from ckptlog.processor.ui.model import Point, Query, RunLog, points, relative, root_of, row_of, run_root, trend_of
from tests.unit.ui.fake import log_of, view


def ticks(svg: str, which: str) -> list[float]:
    return [float(v) for v in re.findall(rf'class="tick {which}" data-value="([^"]+)"', svg)]


def test_the_chart_has_nice_ticks_a_grid_and_a_line_through_the_values() -> None:
    scores = [0.7004, 0.7312, 0.7696, 0.7102, 0.7455] * 6
    v = view([("file:///r/c29", scores[29])])
    v["checkpoints"][0]["report_index"] = 29
    svg = chart(points(v, log_of(scores, kept={29}), "acc"), "acc")
    assert ticks(svg, "y") == [0.70, 0.72, 0.74, 0.76, 0.78]
    assert ticks(svg, "x") == [0, 5, 10, 15, 20, 25, 30]
    assert svg.count('class="grid"') == 12
    line = re.search(r'<polyline class="line" points="([^"]*)"', svg)
    assert line is not None and len(line.group(1).split()) == 30
    assert "report index" in svg and 'data-metric="acc"' in svg


def test_every_mark_carries_what_the_tooltip_shows() -> None:
    svg = chart(points(view([("file:///r/c1", 0.9)]), log_of([0.2, 0.9], {1}), "acc"), "acc")
    mark = re.search(r'<circle class="mark kept" data-path="file:///r/c0"[^>]*>', svg) or re.search(
        r'<circle class="mark evicted" data-path="file:///r/c0"[^>]*>', svg
    )
    assert mark is not None
    assert 'data-index="0"' in mark.group(0) and 'data-value="0.2"' in mark.group(0)
    assert 'data-marks="evicted"' in mark.group(0) and "cx=" in mark.group(0)


def test_the_legend_names_only_the_marks_the_chart_has() -> None:
    found = points(view([("file:///r/c1", 0.9)]), log_of([0.2, 0.9], {1}), "acc")
    keys = re.findall(r'class="key ([^"]+)"', legend(found))
    assert keys == ["best", "latest", "kept", "evicted"]
    assert re.findall(r'class="key ([^"]+)"', legend(points(view([("p", 0.5)]), RunLog(), "loss"))) == [
        "best",
        "latest",
        "kept",
        "no-value",
    ]


def test_each_run_gets_a_sparkline_and_its_paths_are_shortened_to_its_root() -> None:
    root = "file:///tmp/pytest-of-someone/pytest-1234/test_a_long_name0/runs/run-0/"
    v = view([(root + "c3", 0.9), (root + "c1", 0.95)], latest=root + "c4")
    v["checkpoints"][0]["report_index"], v["checkpoints"][1]["report_index"] = 3, 1
    log = log_of([0.1, 0.95, 0.3, 0.9, 0.5], kept={1, 3}, root=root)
    assert root_of(v, log) == root and relative(root + "c3", root) == "c3"
    html = pages.runs_page([row_of("run-0", v, log, 0)], 1, Query(), {"run-0": trend_of(v, log)})
    assert f'title="{root}c1">c1</span>' in html and f'title="{root}c4">c4</span>' in html
    assert f">{root}" not in html
    spark = re.search(r'<svg [^>]*class="spark"[^>]*data-points="(\d+)"', html)
    assert spark is not None and spark.group(1) == "5"
    assert 'class="best"' in html and 'class="latest"' in html


def test_a_run_root_is_a_directory_and_unrelated_paths_stay_whole() -> None:
    assert run_root(["file:///a/run/c1", "file:///a/run/c10"]) == "file:///a/run/"
    assert run_root(["s3://b/x/c1"]) == "s3://b/x/"
    assert run_root(["s3://b/x", "gs://b/y"]) == ""
    assert relative("s3://b/x", "") == "s3://b/x" and relative("file:///a/", "file:///a/") == "file:///a/"


def test_sparklines_thin_long_runs_and_draw_nothing_without_values() -> None:
    found = [Point(f"p{i}", i, math.sin(i / 50), ("evicted",)) for i in range(10_000)]
    spark = sparkline(found, "acc")
    line = re.search(r'points="([^"]*)"', spark)
    assert line is not None and len(line.group(1).split()) <= 120
    assert "polyline" not in sparkline([Point("p", 0, None, ())], "acc")


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False, allow_infinity=False))
def test_an_axis_covers_any_finite_range_with_few_ascending_ticks(a: float, b: float) -> None:
    lo, hi = min(a, b), max(a, b)
    ax = axis(lo, hi)
    assert ax.lo <= lo and ax.hi >= hi and ax.lo < ax.hi
    assert 2 <= len(ax.ticks) <= 12 and list(ax.ticks) == sorted(set(ax.ticks))
    for value in (lo, hi):
        assert -1e-9 <= (ax.place(value, 0, 1)) <= 1 + 1e-9
    assert all(ax.label(t) for t in ax.ticks)


def test_a_chart_takes_values_near_the_float_limits() -> None:
    found = [Point("a", 0, -1.7e308, ("kept",)), Point("b", 1, 1.7e308, ("kept", "best"))]
    svg = chart(found, "huge")
    assert ticks(svg, "y") == [-1.7e308, 1.7e308]
    assert "nan" not in svg and "inf" not in svg
