"""Issue 38 item 1: the console reads a nested score attribute (`eval/acc` in `{"eval": {"acc": …}}`)
as the fold does (contract §3, `ckptlog.events.metrics`) — the runs page's score, the kept table, the
chart's values and the metric menu."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ckptlog.events.metrics import MISSING, flatten, lookup
from ckptlog.processor.foldfile import fold_lines
from ckptlog.processor.ui import pages
from ckptlog.processor.ui.chart import chart
from ckptlog.processor.ui.model import Query, RunLog, View, metrics_of, points, row_of
from tests import factories as f

ROOT = "file:///data/runs/nested"
SCORES = [0.7004, 0.7312, 0.7696, 0.7102, 0.7455]


def folded() -> tuple[View, RunLog]:
    """A run ranked by `eval/acc`, folded as `ckptlog fold` does, and its checkpoints-topic log."""
    lines = [f.started("nested", ROOT, keep=2, attr="eval/acc")]
    log = RunLog()
    for i, score in enumerate(SCORES):
        metrics = {"eval": {"acc": score, "loss": 1 - score}, "step": i, "tag": "x"}
        lines.append(f.report("nested", metrics, f"{ROOT}/c{i}"))
        log.take("checkpoint_registered", {"checkpoint_path": f"{ROOT}/c{i}", "report_index": i, "metrics": metrics}, i)
    view: View = {k: v for k, v in fold_lines(lines).document()["runs"]["nested"].items() if k != "evicted"}
    return view, log


def test_the_runs_page_kept_table_chart_and_menu_read_a_nested_score() -> None:
    view, log = folded()
    assert [c["path"] for c in view["checkpoints"]] == [f"{ROOT}/c4", f"{ROOT}/c2"]  # the fold ranked by eval/acc
    row = row_of("nested", view, log, 0)
    assert row.score == 0.7696
    assert "<td>0.7696</td>" in pages.runs_page([row], 1, Query())
    found = points(view, log, "eval/acc")
    assert [p.value for p in found] == SCORES
    kept = pages.run_page("nested", view, found, metrics_of(view, log), "eval/acc").split('class="kept"')[1]
    cells = re.findall(r"<td>(0\.\d+|—)</td>", kept.split("</table>")[0])
    assert cells == ["0.7696", "0.7455"]
    y = [float(m) for m in re.findall(r'<circle [^>]*cy="([\d.]+)"', chart(found, "eval/acc"))]
    assert len(set(y)) == len(SCORES)  # not a flat line
    assert metrics_of(view, log) == ["eval/acc", "eval/loss", "step"]  # leaves, numeric, never the dict `eval`


def test_the_menu_and_kept_table_take_huge_ints_and_ambiguous_keys() -> None:
    view, log = folded()
    view["checkpoints"][-1]["metrics"] = {"eval": {"acc": 10**400}, "a/b": {"c": 1}, "a": {"b/c": 2}}
    assert metrics_of(view, log)[-1] == "a/b/c"
    html = pages.run_page("nested", view, [], metrics_of(view, log), "eval/acc")
    assert "<td>1e+400</td>" in html  # ckptlog.events.numbers: its magnitude, not 23 of its 401 digits


def test_flatten_names_what_lookup_finds() -> None:
    metrics = {"eval": {"acc": 0.7, "none": {}}, "loss": 2, "a/b": {"c": 1}, "a": {"b/c": 2}, "v/x": 3}
    assert flatten(metrics) == {"eval/acc": 0.7, "loss": 2, "a/b/c": 1, "v/x": 3}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["a", "b", "a/b", "c"]), inner),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "a/b", "b/c", "c"]), json_values, max_size=4))
def test_every_flattened_name_is_a_lookup_of_a_value(metrics: dict[str, Any]) -> None:
    for name, value in flatten(metrics).items():
        found = lookup(metrics, name)
        assert found is not MISSING and not isinstance(found, dict)
        assert found is value
