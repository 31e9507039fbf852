"""What the demo shows: per-run progress and the live checkpoint tables, then a summary."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from rich.columns import Columns
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from ckptlog.client.table import run_table, score_text, short_path
from ckptlog.client.views import RunView
from ckptlog.demo.checks import CheckReport
from ckptlog.demo.plan import RunPlan


@dataclass(slots=True)
class RunProgress:
    plan: RunPlan
    total: int
    sent: int = 0
    restarts: int = 0
    done: bool = False
    view: RunView | None = None


@dataclass(slots=True)
class DemoState:
    """Everything the tasks update and the display reads (one event loop: no locks)."""

    runs: dict[str, RunProgress]
    header: str = ""
    console: str = ""  # the command serving the web console over the demo's topics while it runs
    validations: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)
    phase: str = "starting"

    def tick(self, run_id: str, what: str) -> None:
        run = self.runs[run_id]
        if what == "report":
            run.sent += 1
        elif what == "restart":
            run.restarts += 1
        elif what == "done":
            run.done = True

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


def progress_table(state: DemoState) -> RenderableType:
    """One line per run (reports sent; the processor's watermarks) and one for the evaluator."""
    table = Table.grid(padding=(0, 2))
    for _ in range(4):
        table.add_column(no_wrap=True)
    for run in state.runs.values():
        view = run.view
        marks = (
            f"committed {view.committed} · validated {view.validated} · gen {view.generation}"
            if view
            else "waiting for the processor"
        )
        table.add_row(
            Text(run.plan.name, style="bold"),
            ProgressBar(total=run.total, completed=run.sent, width=16),
            f"{run.sent}/{run.total}",
            Text(marks, style="dim"),
        )
    v = state.validations
    evaluator = Text(
        f"evaluator: {v['VALIDATED']} validated · {v['VALIDATION_FAILED']} failed · {v['VALIDATION_TIMEOUT']} timed out"
    )
    return Group(table, evaluator)


def dashboard(state: DemoState) -> RenderableType:
    tables = [
        run_table(
            run_id,
            run.view,
            run.plan.score_attribute,
            title=f"{run_id}  (keep {run.plan.keep}, {run.plan.score_order} {run.plan.score_attribute})",
        )
        for run_id, run in state.runs.items()
    ]
    title = f"ckptlog demo — {state.phase} — {state.elapsed:4.1f}s"
    return Group(
        Panel(
            Group(Text(state.header, style="dim"), Text(state.console), progress_table(state)),
            title=title,
            title_align="left",
        ),
        Columns(tables, padding=(1, 3)),
    )


def summary(state: DemoState, report: CheckReport) -> RenderableType:
    table = Table(title="summary", title_justify="left")
    for column in ("run", "reports", "kept", "best", "score", "latest", "generation"):
        table.add_column(column)
    for run_id, run in state.runs.items():
        view = run.view
        if view is None:
            table.add_row(run_id, str(run.sent), "—", "—", "—", "—", "—")
            continue
        best = next((c for c in view.checkpoints if c.path == view.best), None)
        table.add_row(
            run_id,
            str(view.committed),
            str(len(view.checkpoints)),
            short_path(view.best) if view.best else "—",
            score_text(best.metrics, run.plan.score_attribute) if best else "—",
            short_path(view.latest) if view.latest else "—",
            str(view.generation),
        )
    verdict = (
        Text(f"✔ all checks passed in {state.elapsed:.1f}s", style="bold green")
        if report.ok
        else Text(f"✘ {len(report.problems)} check(s) failed", style="bold red")
    )
    lines = [
        f"views on the state topic == offline fold of the input log ({len(state.runs)} runs, "
        f"{report.rejected} rejected)",
        f"evicted checkpoints deleted from disk: {report.deleted}/{report.evicted}",
        f"kept/latest/pending checkpoints still on disk: {report.kept_on_disk}",
    ]
    details = Text("\n".join(lines + report.problems))
    return Group(table, details, verdict)
