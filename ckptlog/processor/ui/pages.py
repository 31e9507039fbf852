"""The console's HTML pages, built from VIEW dicts and a run's log. Pure; everything escaped.

No inline script or style (the CSP is `default-src 'self'`): the pages link /static/ui.css and
/static/live.js, which re-fetches the page's `<main>` when /events says something changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from ckptlog.events.metrics import MISSING, lookup
from ckptlog.events.numbers import is_number, number_text
from ckptlog.processor.ui.chart import chart, legend, sparkline
from ckptlog.processor.ui.model import PAGE_SIZE, SORTS, Point, Query, Row, Trend, View, relative

COLUMNS = (
    ("run", "run"),
    ("kept", "kept"),
    ("best", None),
    ("score", "score"),
    ("trend", None),
    ("latest", None),
    ("committed", "committed"),
    ("validated", "validated"),
    ("generation", "generation"),
    ("warnings", "warnings"),
    ("rejections", "rejections"),
    ("last activity", "last"),
)
TIMELINE_KINDS = {
    "started",
    "registered",
    "status_changed",
    "evicted",
    "deleted",
    "deletion_refused",
    "restart",
    "warning",
    "finished",
    "reopened",
    "forgotten",
    "rejected",
}


def e(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def run_url(run: str) -> str:
    return "/runs/" + quote(run, safe="")


def checkpoint_url(run: str, path: str) -> str:
    return f"{run_url(run)}/checkpoints/{quote(path, safe='')}"


def layout(title: str, body: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{e(title)} · ckptlog</title>"
        '<link rel="stylesheet" href="/static/ui.css"><script src="/static/live.js" defer></script></head>'
        '<body><header><a href="/">ckptlog</a> <span class="ro">read-only console</span></header>'
        f'<main id="main">{body}</main></body></html>'
    )


def when(ms: int | None) -> str:
    if ms is None:
        return "—"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def score_text(value: int | float | None) -> str:
    return "—" if value is None else number_text(value)


def metric_text(value: Any) -> str:
    """A metric's value as a cell shows it (`ckptlog.events.metrics.MISSING`: "—"), at most 24 characters."""
    if value is MISSING:
        return "—"
    if is_number(value):
        return number_text(value)
    text = value if isinstance(value, str) else json.dumps(value, allow_nan=True)
    return text if len(text) <= 24 else text[:23] + "…"


def short_path(path: str | None, root: str, href: str | None = None) -> str:
    """A path relative to the run's root, the whole path in its title (shown on hover)."""
    if path is None:
        return "—"
    tag = f'a href="{e(href)}"' if href is not None else "span"
    return f'<{tag} class="clip" title="{e(path)}">{e(relative(path, root))}</{tag.split()[0]}>'


def _sort_link(label: str, key: str | None, query: Query) -> str:
    if key is None:
        return f"<th>{e(label)}</th>"
    desc = "0" if query.sort == key and query.desc else "1" if query.sort == key else "0"
    href = "/?" + urlencode({"q": query.q, "sort": key, "desc": desc})
    arrow = (" ↓" if query.desc else " ↑") if query.sort == key else ""
    return f'<th><a href="{e(href)}">{e(label)}{arrow}</a></th>'


def _row(row: Row, trend: Trend | None) -> str:
    root = trend.root if trend is not None else ""
    spark = sparkline(trend.points, trend.metric) if trend is not None else ""
    cells = [
        f'<td class="run"><a class="clip" href="{e(run_url(row.run))}" title="{e(row.run)}">{e(row.run)}</a>'
        f"{' ✓' if row.finished else ''}</td>",
        f"<td>{row.kept}</td>",
        f'<td class="path">{short_path(row.best, root)}</td>',
        f"<td>{score_text(row.score)}</td>",
        f'<td class="trend">{spark}</td>',
        f'<td class="path">{short_path(row.latest, root)}</td>',
        f"<td>{row.committed}</td>",
        f"<td>{row.validated}</td>",
        f"<td>{row.generation}</td>",
        f"<td>{row.warnings}</td>",
        f"<td>{row.rejections}</td>",
        f"<td>{when(row.last_ms)}</td>",
    ]
    return f'<tr data-run="{e(row.run)}">{"".join(cells)}</tr>'


def _pager(query: Query, total: int) -> str:
    pages = max(1, -(-total // PAGE_SIZE))
    links = []
    for number, label in ((query.page - 1, "← previous"), (query.page + 1, "next →")):
        if 1 <= number <= pages:
            params = {"q": query.q, "sort": query.sort, "desc": "1" if query.desc else "0", "page": number}
            links.append(f'<a href="/?{e(urlencode(params))}">{label}</a>')
    return f'<p class="pager">page {query.page} of {pages} · {total} runs {" ".join(links)}</p>'


def runs_page(rows: Sequence[Row], total: int, query: Query, trends: Mapping[str, Trend] | None = None) -> str:
    """The runs table: one page of the matching rows (already selected), with sort links; `trends`
    (model.trend_of, for these rows) draws each row's sparkline and shortens its paths."""
    trends = trends or {}
    form = (
        '<form method="get" action="/"><input name="q" placeholder="filter run ids" '
        f'value="{e(query.q)}"><input type="hidden" name="sort" value="{e(query.sort)}">'
        f'<input type="hidden" name="desc" value="{"1" if query.desc else "0"}"><button>filter</button></form>'
    )
    head = "".join(_sort_link(label, key, query) for label, key in COLUMNS)
    body = "".join(_row(r, trends.get(r.run)) for r in rows) or f'<tr><td colspan="{len(COLUMNS)}">no runs</td></tr>'
    table = f'<table class="runs"><thead><tr>{head}</tr></thead><tbody id="rows">{body}</tbody></table>'
    return layout("runs", f"<h1>Runs</h1>{form}{_pager(query, total)}{table}")


KEPT_PAGE, HISTORY_PAGE = 100, 200


def _page_links(param: str, page: int, total: int, size: int, others: dict[str, Any]) -> str:
    """`← previous` / `next →` links to the pages of one table, the page's other parameters kept."""
    pages = max(1, -(-total // size))
    links = [f"{param} page {page} of {pages} ({total})"]
    for number, label in ((page - 1, "← previous"), (page + 1, "next →")):
        if 1 <= number <= pages:
            links.append(f'<a href="?{e(urlencode({**others, param: number}))}">{label}</a>')
    return f'<p class="pager">{" ".join(links)}</p>' if pages > 1 else ""


def _kept_table(run: str, view: View, attribute: str | None, root: str, page: int = 1) -> str:
    entries = list(reversed(view.get("checkpoints", [])))  # best first
    rows = []
    start = (page - 1) * KEPT_PAGE
    for rank, c in enumerate(entries[start : start + KEPT_PAGE], start + 1):
        score = lookup(c["metrics"], attribute) if attribute else MISSING
        flags = [
            f for f, on in (("best", c["path"] == view.get("best")), ("latest", c["path"] == view.get("latest"))) if on
        ]
        if c.get("preserved"):
            flags.append(f"preserved ({c['preserved']})")
        rows.append(
            f'<tr data-path="{e(c["path"])}"><td>{rank}</td>'
            f'<td class="path">{short_path(c["path"], root, checkpoint_url(run, c["path"]))}</td>'
            f"<td>{e(c['report_index'])}</td><td>{e(c['status'])}</td><td>{e(metric_text(score))}</td>"
            f"<td>{e(', '.join(flags))}</td></tr>"
        )
    head = (
        f"<tr><th>rank</th><th>path</th><th>report</th><th>status</th><th>{e(attribute or 'score')}</th><th></th></tr>"
    )
    body = "".join(rows) or '<tr><td colspan="6">nothing kept</td></tr>'
    return f'<table class="kept"><thead>{head}</thead><tbody>{body}</tbody></table>'


def _effect(run: str, effect: dict[str, Any], root: str) -> str:
    kind = str(effect.get("kind"))
    path = effect.get("path")
    text = f'<span class="kind {e(kind)}">{e(kind)}</span>'
    if isinstance(path, str):
        text += f' <span class="path">{short_path(path, root, checkpoint_url(run, path))}</span>'
    details = {k: v for k, v in effect.items() if k not in {"kind", "path"}}
    reason = details.get("reason")
    if isinstance(reason, dict):  # an eviction's reason: its rule, then the facts it weighed
        facts = ", ".join(f"{k} {v}" for k, v in reason.items() if k != "rule")
        details["reason"] = f"{reason.get('rule')} ({facts})"
    if details:
        text += " " + " ".join(f"{e(k)}={e(v)}" for k, v in details.items())
    return f"<li>{text}</li>"


def timeline(run: str, steps: Iterable[dict[str, Any]] | None, page: int = 1, root: str = "") -> str:
    """The run's history (History.history steps), newest first, HISTORY_PAGE steps a page;
    watermarks left out; paths relative to `root`."""
    if steps is None:
        return '<p class="note">history not available</p>'
    shown = [s for s in steps if any(x.get("kind") in TIMELINE_KINDS for x in s.get("effects", []))]
    shown.reverse()
    items = []
    for step in shown[(page - 1) * HISTORY_PAGE : page * HISTORY_PAGE]:
        effects = [x for x in step.get("effects", []) if x.get("kind") in TIMELINE_KINDS]
        if effects:
            head = f"@{e(step.get('offset'))} {e(step.get('type') or 'undecodable')} {e(step.get('time') or '')}"
            items.append(
                f'<li class="step"><b>{head}</b><ul>{"".join(_effect(run, x, root) for x in effects)}</ul></li>'
            )
    return f'<ol class="timeline">{"".join(items)}</ol>' if items else "<p>no history</p>"


def _steps_shown(steps: list[dict[str, Any]] | None) -> int:
    return sum(1 for s in steps or [] if any(x.get("kind") in TIMELINE_KINDS for x in s.get("effects", [])))


def _metric_form(metrics: Sequence[str], metric: str | None) -> str:
    options = "".join(f'<option value="{e(m)}"{" selected" if m == metric else ""}>{e(m)}</option>' for m in metrics)
    return (
        f'<form method="get"><label>metric <select name="metric">{options}</select></label><button>show</button></form>'
    )


def run_page(
    run: str,
    view: View,
    found: Sequence[Point],
    metrics: Sequence[str],
    metric: str | None,
    steps: list[dict[str, Any]] | None = None,
    pages: tuple[int, int] = (1, 1),
    root: str = "",
) -> str:
    """A run: its chart, its kept checkpoints in rank order, its history (`pages`: which page of the
    kept table and of the history); paths shown relative to `root` (model.root_of)."""
    attribute = (view.get("checkpoint_config") or {}).get("checkpoint_score_attribute")
    summary = (
        f"<p>committed {e(view.get('committed'))} · validated {e(view.get('validated'))} · generation "
        f'{e(view.get("generation"))} · best <span class="path">{short_path(view.get("best"), root)}</span> · latest '
        f'<span class="path">{short_path(view.get("latest"), root)}</span>'
        f"{' · finished' if view.get('finished') else ''}</p>"
    )
    if root:
        summary += f'<p class="note">paths below <span class="path">{e(root)}</span></p>'
    shown = metric or "report order"
    others = {"metric": metric} if metric else {}
    plot = f'<div class="plot">{chart(found, shown)}<div class="tip" hidden></div></div>{legend(found)}'
    body = (
        f"<h1>Run <code>{e(run)}</code></h1>{summary}{_metric_form(metrics, metric)}{plot}"
        f"<h2>Kept, best first</h2>{_kept_table(run, view, attribute, root, pages[0])}"
        f"{_page_links('kept', pages[0], len(view.get('checkpoints', [])), KEPT_PAGE, others | {'history': pages[1]})}"
        f"<h2>History</h2>{timeline(run, steps, pages[1], root)}"
        f"{_page_links('history', pages[1], _steps_shown(steps), HISTORY_PAGE, others | {'kept': pages[0]})}"
        f'<p><a href="{e("/api" + run_url(run))}">VIEW JSON</a></p>'
    )
    return layout(f"run {run}", body)


def checkpoint_page(run: str, path: str, doc: dict[str, Any], paragraph: str) -> str:
    body = (
        f'<h1>Checkpoint</h1><p>run <a href="{e(run_url(run))}">{e(run)}</a></p><p class="path">{e(path)}</p>'
        f'<p class="state">state: <b>{e(doc.get("state"))}</b></p><p>{e(paragraph)}</p>'
        f"<pre>{e(json.dumps(doc, indent=2, default=str))}</pre>"
    )
    return layout(f"checkpoint {path}", body)


def message_page(title: str, text: str) -> str:
    return layout(title, f"<h1>{e(title)}</h1><p>{e(text)}</p>")


__all__ = ["SORTS", "checkpoint_page", "layout", "message_page", "run_page", "runs_page", "timeline"]
