"""What the console shows, from VIEW dicts (contract §4) and the run's checkpoint outputs. Pure.

A `RunLog` is what the checkpoints topic says about one run: every checkpoint it reported (with
its metrics), the evicted ones (with the reason) and the deleted ones. `rows` turns VIEWs into
the runs table (filtered, sorted, paged); `points` marks each reported checkpoint of a run.
"""

from __future__ import annotations

import json
import os.path
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ckptlog.events.metrics import flatten, lookup
from ckptlog.events.numbers import comparable, is_number, number_text, plotted
from ckptlog.events.outputs import CHECKPOINT_EVICTED, CHECKPOINT_REGISTERED, CHECKPOINTS_DELETED, WARNING

View = dict[str, Any]
PAGE_SIZE = 100
SORTS = ("run", "kept", "score", "committed", "validated", "generation", "warnings", "rejections", "last")
MARKS = ("best", "latest", "pending", "preserved", "kept", "evicted", "deleted")


@dataclass
class Reported:
    path: str
    report_index: int
    metrics: dict[str, Any]
    preserved: str | None = None


@dataclass
class RunLog:
    """One run's outputs on the checkpoints topic."""

    reported: dict[str, Reported] = field(default_factory=dict)
    evicted: dict[str, str] = field(default_factory=dict)  # path -> reason
    deleted: set[str] = field(default_factory=set)
    warnings: int = 0
    last_ms: int | None = None

    def take(self, name: str, data: dict[str, Any], timestamp_ms: int | None) -> None:
        """Apply one output (`name` as in ckptlog/events/outputs.py) of the run."""
        if timestamp_ms is not None:
            self.last_ms = max(self.last_ms or 0, timestamp_ms)
        if name == CHECKPOINT_REGISTERED.name:
            path = str(data["checkpoint_path"])
            self.reported[path] = Reported(
                path, int(data["report_index"]), dict(data["metrics"]), data.get("preserved")
            )
            self.evicted.pop(path, None)
            self.deleted.discard(path)
        elif name == CHECKPOINT_EVICTED.name:
            self.evicted[str(data["checkpoint_path"])] = str(data.get("reason", ""))
        elif name == CHECKPOINTS_DELETED.name:
            self.deleted.update(str(p) for p in data.get("checkpoint_paths", ()))
        elif name == WARNING.name:
            self.warnings += 1


@dataclass(frozen=True)
class Row:
    run: str
    kept: int
    best: str | None
    score: int | float | None  # exact: sorts and shows a huge int score as the fold compares it
    latest: str | None
    committed: int
    validated: int
    generation: int
    warnings: int
    rejections: int
    last_ms: int | None
    finished: bool


def score_attribute(view: View) -> str | None:
    config = view.get("checkpoint_config") or {}
    attribute = config.get("checkpoint_score_attribute")
    return attribute if isinstance(attribute, str) else None


def value_of(metrics: dict[str, Any], name: str | None) -> int | float | None:
    """The metric `name` names, read as the fold reads it (contract §3, `ckptlog.events.metrics.lookup`:
    `eval/acc` finds `{"eval": {"acc": …}}`), exactly (`ckptlog.events.numbers.comparable`: an int
    of any size or a finite float; None: no name, absent, not a number)."""
    return None if name is None else comparable(lookup(metrics, name))


def best_score(view: View) -> int | float | None:
    attribute = score_attribute(view)
    best = next((c for c in view.get("checkpoints", []) if c["path"] == view.get("best")), None)
    if attribute is None or best is None:
        return None
    return value_of(best["metrics"], attribute)


def row_of(run: str, view: View, log: RunLog | None, rejections: int) -> Row:
    return Row(
        run=run,
        kept=len(view.get("checkpoints", [])),
        best=view.get("best"),
        score=best_score(view),
        latest=view.get("latest"),
        committed=int(view.get("committed", 0)),
        validated=int(view.get("validated", 0)),
        generation=int(view.get("generation", 0)),
        warnings=log.warnings if log is not None else 0,
        rejections=rejections,
        last_ms=log.last_ms if log is not None else None,
        finished=bool(view.get("finished")),
    )


@dataclass(frozen=True)
class Query:
    q: str = ""
    sort: str = "run"
    desc: bool = False
    page: int = 1

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> Query:
        sort = params.get("sort", "run")
        try:
            page = max(1, int(params.get("page", "1")))
        except ValueError:
            page = 1
        return cls(params.get("q", ""), sort if sort in SORTS else "run", params.get("desc") == "1", page)


def _key(row: Row, sort: str) -> tuple[bool, Any, str]:
    value = getattr(row, "last_ms" if sort == "last" else sort)
    return (value is None, value if value is not None else 0, row.run)


def select(rows: list[Row], query: Query) -> tuple[list[Row], int]:
    """The page of rows the query asks for, and how many rows match."""
    matching = [r for r in rows if query.q.lower() in r.run.lower()]
    matching.sort(key=lambda r: _key(r, query.sort), reverse=query.desc)
    if query.desc:  # no value last either way
        matching.sort(key=lambda r: _key(r, query.sort)[0])
    start = (query.page - 1) * PAGE_SIZE
    return matching[start : start + PAGE_SIZE], len(matching)


@dataclass(frozen=True)
class Point:
    path: str
    report_index: int
    value: float | None  # where the chart places it (`ckptlog.events.numbers.plotted`)
    marks: tuple[str, ...]
    exact: int | float | None = None  # the metric itself when `value` is not (an int beyond a float)

    @property
    def text(self) -> str:
        """The value as its mark's tooltip says it (`no value`)."""
        shown = self.exact if self.exact is not None else self.value
        return "no value" if shown is None else number_text(shown)


def kept_of(view: View) -> dict[str, dict[str, Any]]:
    return {c["path"]: c for c in view.get("checkpoints", [])}


def marks_of(path: str, view: View, log: RunLog, kept: dict[str, dict[str, Any]] | None = None) -> tuple[str, ...]:
    """The marks of one checkpoint; `kept` (kept_of(view)) once per page, not once per checkpoint."""
    kept = kept_of(view) if kept is None else kept
    found: list[str] = []
    if path == view.get("best"):
        found.append("best")
    if path == view.get("latest"):
        found.append("latest")
    entry = kept.get(path)
    if entry is not None and entry.get("status") == "PENDING_VALIDATION":
        found.append("pending")
    if (entry is not None and entry.get("preserved")) or (path in log.reported and log.reported[path].preserved):
        found.append("preserved")
    if entry is not None:
        found.append("kept")
    elif path in log.evicted:
        found.append("evicted")
    if path in log.deleted and entry is None:
        found.append("deleted")
    return tuple(found)


def metrics_of(view: View, log: RunLog) -> list[str]:
    """Every numeric metric a checkpoint of the run reported, flattened as the fold reads them
    (`eval/acc`, never the dict `eval`), in the order they came; the score attribute first."""
    names: dict[str, None] = {}
    attribute = score_attribute(view)
    if attribute is not None:
        names[attribute] = None
    for metrics in [*(r.metrics for r in log.reported.values()), *(c["metrics"] for c in view.get("checkpoints", []))]:
        names.update((name, None) for name, value in flatten(metrics).items() if is_number(value))
    return list(names)


def default_metric(view: View, metrics: list[str]) -> str | None:
    """What a run's chart and sparkline show unless asked: its score attribute, else its first metric."""
    return score_attribute(view) or (metrics[0] if metrics else None)


def points(view: View, log: RunLog, metric: str | None) -> list[Point]:
    """Every checkpoint the run reported (and every kept one), in report order, marked."""
    reported = dict(log.reported)
    for c in view.get("checkpoints", []):  # the VIEW's metrics include a VALIDATED result's
        reported[c["path"]] = Reported(c["path"], int(c["report_index"]), dict(c["metrics"]), c.get("preserved"))
    ordered = sorted(reported.values(), key=lambda r: (r.report_index, r.path))
    kept = kept_of(view)
    found = []
    for r in ordered:
        exact = value_of(r.metrics, metric)
        found.append(Point(r.path, r.report_index, plotted(exact), marks_of(r.path, view, log, kept), exact))
    return found


def run_root(paths: Iterable[str]) -> str:
    """The directory every one of a run's checkpoint paths lies below, ending in `/` ("" when
    they share none): the console shows paths relative to it."""
    common = os.path.commonprefix(list(paths))  # noqa: RUF071 (URLs: commonpath would fold `file:///` to `file:/`)
    return common[: common.rfind("/") + 1]


def root_of(view: View, log: RunLog | None) -> str:
    """`run_root` of every path the run's VIEW and log name."""
    paths = [c["path"] for c in view.get("checkpoints", [])]
    paths += [p for p in (view.get("latest"), view.get("best")) if isinstance(p, str)]
    return run_root([*paths, *(log.reported if log is not None else ())])


def relative(path: str, root: str) -> str:
    """`path` below `root` (`ckpt-000012`), or whole when it is not below it."""
    rest = path[len(root) :] if root and path.startswith(root) else ""
    return rest or path


@dataclass(frozen=True)
class Trend:
    """What a row of the runs page draws: the run's default metric over its reports, and its root."""

    metric: str | None
    points: list[Point]
    root: str


def trend_of(view: View, log: RunLog | None) -> Trend:
    log = log if log is not None else RunLog()
    metric = score_attribute(view) or default_metric(view, metrics_of(view, log))  # metrics_of only without one
    return Trend(metric, points(view, log, metric), root_of(view, log))


def view_json(view: View) -> str:
    return json.dumps(view, sort_keys=False, allow_nan=True)
