"""Rich rendering of a run's VIEW: one row per kept checkpoint, best and latest marked.

Shared by `ckptlog watch` and `ckptlog demo`, so both show the same picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from ckptlog.client.views import ReportedCheckpoint, RunView
from ckptlog.events.metrics import lookup
from ckptlog.events.numbers import is_number, number_text

STATUS_STYLE = {
    "COMMITTED": "green",
    "PENDING_VALIDATION": "yellow",
    "VALIDATED": "bold green",
    "VALIDATION_TIMEOUT": "magenta",
    "VALIDATION_FAILED": "red",
}


def short_path(path: str, root: str | None = None) -> str:
    """The checkpoint's last path segment: the part that differs between rows."""
    if root and path.startswith(root):
        return path[len(root) :].lstrip("/") or path
    return path.rstrip("/").rsplit("/", 1)[-1]


def common_root(paths: Sequence[str]) -> str:
    """The deepest directory (ending in `/`) every path lies below: a run's checkpoints share its
    root, so a table shows them by `short_path(path, root)`; "" when they share none (or just `/`)."""
    if not paths:
        return ""
    first, last = min(paths), max(paths)  # the common prefix of all is that of the extremes
    size = next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), min(len(first), len(last)))
    root = first[: first.rfind("/", 0, size) + 1]
    return root if root.partition("://")[2].strip("/") else ""


def format_value(value: Any) -> str:
    """A metric in a table cell: a number by `ckptlog.events.numbers.number_text` (4 digits; any int
    size), — for None, anything else as `str` shows it."""
    if is_number(value):
        return number_text(value, 4)
    return "—" if value is None else str(value)


def score_text(metrics: dict[str, Any], attribute: str) -> str:
    """The score as the fold sees it (`/` walks nested metrics); — when missing."""
    value = lookup(metrics, attribute)
    return "—" if type(value) is object else format_value(value)  # lookup's "missing" sentinel


def _metrics_text(metrics: dict[str, Any], limit: int = 60) -> str:
    text = ", ".join(f"{k}={format_value(v)}" for k, v in metrics.items() if not isinstance(v, dict))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def rejected_text(run_id: str, rejected: int) -> str:
    """`3 events rejected: ckptlog rejections RUN` (empty for none)."""
    if not rejected:
        return ""
    return f"{rejected} event{'s' if rejected > 1 else ''} rejected: `ckptlog rejections {run_id}`"


def retention_text(view: RunView) -> str:
    """What the run keeps, as its VIEW says: `keeps 3 by val/loss (min), plus the latest, pending
    and preserved`; `finished` for a finished run's final VIEW."""
    config = view.checkpoint_config
    assert config is not None
    by = config.checkpoint_score_attribute
    order = f"by {by} ({config.checkpoint_score_order})" if by else "newest"
    keeps = "keeps every checkpoint" if config.num_to_keep is None else f"keeps {config.num_to_keep} {order}"
    plus = "" if config.num_to_keep is None else ", plus the latest, pending and preserved ones"
    return ("finished: " if view.finished else "") + keeps + plus


def rows_shown(paths: Sequence[str], latest: str | None, limit: int) -> tuple[list[int], int]:
    """Which kept checkpoints a table shows (their indexes, in the VIEW's order) when it shows at
    most `limit` (0: every one): the `limit` best ranked (the VIEW's last: best last) and the
    latest too when it is not among them; and how many are left out."""
    if limit <= 0 or len(paths) <= limit:
        return list(range(len(paths))), 0
    first = len(paths) - limit
    latest_at = next((i for i, path in enumerate(paths[:first]) if path == latest), None)
    shown = ([] if latest_at is None else [latest_at]) + list(range(first, len(paths)))
    return shown, len(paths) - len(shown)


def more_text(hidden: int, flag: str) -> str:
    """The row that stands for the kept checkpoints a table leaves out (`flag` shows them)."""
    return f"… and {hidden} more kept checkpoint{'s' if hidden > 1 else ''}, lower ranked ({flag} 0 shows all)"


def run_table(
    run_id: str,
    view: RunView | None,
    score_attribute: str | None = None,
    title: str | None = None,
    rejected: int = 0,
    problem: str | None = None,
    warned: int = 0,
    limit: int = 0,
) -> Table:
    """The kept checkpoints, best last (the VIEW's order), with ★ best, ● latest and ◆ preserved;
    the score column is `score_attribute`, else the run's own (its VIEW's checkpoint_config); the
    caption says what the run keeps and counts its rejected events and warnings, if any;
    `problem`: why the run's newest state record cannot be read (a row says so); `limit`: at most
    that many rows of checkpoints (`rows_shown`; 0: all), a row says how many more. Text from the
    topic is never taken as markup."""
    if score_attribute is None and view is not None and view.checkpoint_config is not None:
        score_attribute = view.checkpoint_config.checkpoint_score_attribute
    table = Table(title=Text(title or f"run {run_id}"), title_justify="left", expand=False, pad_edge=False)
    table.add_column("#", justify="right", style="dim")
    table.add_column("checkpoint")
    table.add_column("status")
    table.add_column(score_attribute or "metrics", justify="right" if score_attribute else "left")
    table.add_column("", no_wrap=True)
    if problem is not None:
        table.add_row("!", Text(f"unreadable state record: {problem}", "red"), "", "", "")
    if view is None:
        table.caption = Text(
            f"no view yet — {rejected_text(run_id, rejected)}"
            if rejected
            else "no view yet (waiting for the processor)"
        )
        return table
    shown, hidden = rows_shown([c.path for c in view.checkpoints], view.latest, limit)
    if hidden:
        table.add_row("…", Text(more_text(hidden, "--limit"), "dim"), "", "", "")
    for i in shown:
        table.add_row(*_row(view, view.checkpoints[i], score_attribute))
    table.caption = Text(_caption(run_id, view, rejected, warned))
    return table


def _row(view: RunView, ckpt: ReportedCheckpoint, score_attribute: str | None) -> tuple[str, Text, Text, Text, Text]:
    marks = Text()
    if ckpt.path == view.best:
        marks.append("★ best ", style="bold yellow")
    if ckpt.path == view.latest:
        marks.append("● latest ", style="cyan")
    if ckpt.preserved is not None:
        marks.append(f"◆ preserved ({ckpt.preserved})", style="magenta")
    score = score_text(ckpt.metrics, score_attribute) if score_attribute else _metrics_text(ckpt.metrics)
    status = Text(ckpt.status, STATUS_STYLE.get(ckpt.status, ""))
    return str(ckpt.report_index), Text(short_path(ckpt.path)), status, Text(score), marks


def _caption(run_id: str, view: RunView, rejected: int, warned: int) -> str:
    caption = f"committed {view.committed} · validated {view.validated} · generation {view.generation}"
    caption += f" · {retention_text(view)}" if view.checkpoint_config is not None else ""
    caption += f" · {rejected_text(run_id, rejected)}" if rejected else ""
    caption += (
        f" · {warned} warning{'s' if warned > 1 else ''}: `ckptlog rejections {run_id} --warnings`" if warned else ""
    )
    return caption


def view_line(
    run_id: str,
    view: RunView | None,
    score_attribute: str | None = None,
    rejected: int = 0,
    problem: str | None = None,
    warned: int = 0,
) -> str:
    """What `run_table` shows, as one plain line for a pipe or a log file (`ckptlog watch` without a
    terminal): `run R: 3 kept · best ckpt-7 (acc 0.91) · latest ckpt-9 · committed 9 · …`."""
    head = f"run {run_id}: " + ("" if problem is None else f"unreadable state record: {problem} · ")
    if view is None:
        rejections = rejected_text(run_id, rejected)
        return head + (f"no view yet — {rejections}" if rejected else "no view yet (waiting for the processor)")
    if score_attribute is None and view.checkpoint_config is not None:
        score_attribute = view.checkpoint_config.checkpoint_score_attribute
    parts = [f"{len(view.checkpoints)} kept"]
    best = next((c for c in view.checkpoints if c.path == view.best), None)
    if best is not None:
        score = f" ({score_attribute} {score_text(best.metrics, score_attribute)})" if score_attribute else ""
        parts.append(f"best {short_path(best.path)}{score}")
    if view.latest is not None:
        parts.append(f"latest {short_path(view.latest)}")
    return head + " · ".join([*parts, _caption(run_id, view, rejected, warned)])
