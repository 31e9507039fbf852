"""The Grafana dashboard and the Prometheus alert rules query only metrics the processor exports,
in PromQL that is at least well formed, and every alert has its runbook section."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ckptlog.processor.service.metrics import HOOKED
from ckptlog.processor.service.observe import EXPORTED

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy/grafana/ckptlog.json"
ALERTS = REPO / "deploy/prometheus/alerts.yml"
RUNBOOK = REPO / "docs/runbook.md"

HISTOGRAMS = {name for name in HOOKED if not name.endswith("_total")}
FUNCTIONS = {
    "sum", "min", "max", "avg", "count", "topk", "bottomk", "quantile", "rate", "irate", "increase", "deriv",
    "delta", "histogram_quantile", "absent", "clamp_min", "clamp_max", "time", "by", "without", "on",
    "ignoring", "and", "or", "unless", "label_values", "max_over_time", "min_over_time", "avg_over_time",
}  # fmt: skip


def dashboard_queries() -> list[str]:
    def walk(node: Any) -> list[str]:
        if isinstance(node, dict):
            found = [node["expr"]] if isinstance(node.get("expr"), str) else []
            return found + [q for value in node.values() for q in walk(value)]
        if isinstance(node, list):
            return [q for value in node for q in walk(value)]
        return []

    return walk(json.loads(DASHBOARD.read_text()))


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def family(series: str) -> str:
    """ckptlog_fold_seconds_bucket -> ckptlog_fold_seconds; counters keep their _total."""
    for suffix in ("_bucket", "_sum", "_count"):
        if series.endswith(suffix) and series.removesuffix(suffix) in HISTOGRAMS:
            return series.removesuffix(suffix)
    return series


def check_promql(expr: str) -> None:
    """Every ckptlog_ series is exported; brackets balance; every function is a PromQL one."""
    for series in re.findall(r"\bckptlog_[a-z0-9_]+", expr):
        assert family(series) in EXPORTED, f"{series} is not exported by the processor: {expr}"
    unquoted = re.sub(r'"[^"]*"', '""', expr)
    depth = {"(": 0, "[": 0, "{": 0}
    closing = {")": "(", "]": "[", "}": "{"}
    for char in unquoted:
        if char in depth:
            depth[char] += 1
        elif char in closing:
            depth[closing[char]] -= 1
            assert depth[closing[char]] >= 0, f"unbalanced {char}: {expr}"
    assert not any(depth.values()), f"unbalanced brackets: {expr}"
    for name in re.findall(r"\b([a-z_]+)\s*\(", unquoted):
        assert name in FUNCTIONS, f"{name}( is not a PromQL function: {expr}"


def test_dashboard_queries_only_exported_metrics() -> None:
    queries = dashboard_queries()
    assert len(queries) > 20
    for expr in queries:
        check_promql(expr)
    used = {family(s) for q in queries for s in re.findall(r"\bckptlog_[a-z0-9_]+", q)}
    assert len(used) >= 30, f"the dashboard charts only {sorted(used)}"


def test_dashboard_covers_throughput_lag_latency_snapshots_deletions_dead_letters() -> None:
    rows = {p["title"] for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] == "row"}
    wanted = {"Throughput", "Lag", "Latency", "Snapshots and restores", "Checkpoints and deletions", "Dead letters"}
    assert wanted <= rows
    runbook = RUNBOOK.read_text()
    for row in rows:
        assert f"**{row}**" in runbook, f"docs/runbook.md does not explain the dashboard row {row!r}"


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: rule["alert"])
def test_alert_rules_use_exported_metrics_and_have_a_runbook_section(rule: dict[str, Any]) -> None:
    check_promql(rule["expr"])
    assert rule["labels"]["severity"] in {"critical", "warning", "info"}
    assert {"summary", "description", "runbook"} <= set(rule["annotations"])
    anchor = rule["annotations"]["runbook"].split("#", 1)[1]
    headings = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in RUNBOOK.read_text().splitlines()
        if line.startswith("#")
    }
    assert anchor == rule["alert"].lower() and anchor in headings, f"docs/runbook.md has no section {rule['alert']}"
