"""`ckptlog inspect`: the current VIEW of runs, read from the compacted state topic, and how many
events of each run the processor rejected (its dead-letter topic)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ckptlog.cli.errors import cli_errors, echo_err
from ckptlog.cli.main import app
from ckptlog.cli.options import settings_options
from ckptlog.processor.redaction import register_secrets

if TYPE_CHECKING:  # rich, the client library and the settings load when the command runs (issue 38 item 8)
    from rich.console import Console
    from rich.table import Table

    from ckptlog.events.state import Problem
    from ckptlog.kafka.connection import KafkaConnection
    from ckptlog.processor.core.view import View
    from ckptlog.processor.service.settings import ServiceSettings
    from ckptlog.processor.service.views import StateRead

Opt = typer.Option

#: What `inspect --json` prints (its --help and `json_body` share it; tests/unit/cli/test_inspect_paging.py
#: checks that the keys agree).
JSON_SHAPE = (
    '{"runs": {RUN_ID: VIEW}, "rejections": {RUN_ID: count}, "warnings": {RUN_ID: count}, '
    '"undecodable": [PROBLEM, ...]}'
)

DEFAULT_CHECKPOINTS = 20  # kept checkpoints shown per run as a table (a run may keep every one of thousands)


def _metrics(metrics: dict[str, Any], skip: str | None) -> str:
    """The metrics as `name=value` (nested ones by their `/` names), but the score, in its own column."""
    from ckptlog.client.table import format_value
    from ckptlog.events.metrics import flatten

    return ", ".join(f"{name}={format_value(value)}" for name, value in flatten(metrics).items() if name != skip)


def render(
    console: Console, run_id: str, view: View, rejected: int = 0, warned: int = 0, limit: int = 0, wide: bool = False
) -> None:
    """The run's kept checkpoints as a table (every text as plain text: no markup from the topic), a
    column for the run's score attribute, paths below the directory they share, metrics cut to fit
    (`wide`: full paths, every metric); `limit`: at most that many (ckptlog.client.table.rows_shown: the
    best ranked and the latest; 0: all)."""
    from rich.text import Text

    from ckptlog.client.table import common_root, more_text, rows_shown, score_text, short_path

    checkpoints, config = view["checkpoints"], view.get("checkpoint_config") or {}
    attribute = config.get("checkpoint_score_attribute")
    root = "" if wide else common_root([c["path"] for c in checkpoints])
    table = _table(f"run {run_id}" + (f"  (checkpoints in {root})" if root else ""), attribute, wide)
    shown, hidden = rows_shown([c["path"] for c in checkpoints], view["latest"], limit)
    if hidden:
        blank = [Text("")] * (4 if attribute else 3)
        table.add_row(Text("…"), Text(""), Text(more_text(hidden, "--checkpoints")), *blank)
    for i in shown:
        ckpt = checkpoints[i]
        marks = " ".join(
            m for m, hit in (("latest", ckpt["path"] == view["latest"]), ("best", ckpt["path"] == view["best"])) if hit
        )
        score = [score_text(ckpt["metrics"], attribute)] if attribute else []
        path = short_path(ckpt["path"], root) if root else ckpt["path"]
        metrics = _metrics(ckpt["metrics"], attribute)
        table.add_row(*map(Text, (str(i), str(ckpt["report_index"]), path, ckpt["status"], *score, metrics, marks)))
    console.print(table)
    console.print(Text(_summary(run_id, view, root, rejected, warned)))


def _table(title: str, attribute: str | None, wide: bool) -> Table:
    """An empty table with a column for the score `attribute`, if any; the metrics (and, `wide`, the
    paths) wrap to fit, the other columns are never cut."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(
        title=Text(title),
        title_justify="left",
        expand=False,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        collapse_padding=True,
    )
    for column in ("#", "report", "checkpoint", "status", *([attribute] if attribute else []), "metrics", ""):
        wraps = column == "metrics" or (wide and column == "checkpoint")
        table.add_column(column, no_wrap=not wraps, overflow="fold", justify="right" if column == attribute else "left")
    return table


def _summary(run_id: str, view: View, root: str, rejected: int, warned: int) -> str:
    from ckptlog.client.table import short_path

    def name(path: str | None) -> str:
        return "—" if path is None else short_path(path, root) if root else path

    return (
        f"  committed={view['committed']} validated={view['validated']} generation={view['generation']} "
        f"index_in_generation={view['index_in_generation']} latest={name(view['latest'])} best={name(view['best'])}"
        + (f"\n  rejected={rejected} (`ckptlog rejections {run_id}`)" if rejected else "")
        + (f"\n  warnings={warned} (`ckptlog rejections {run_id} --warnings`)" if warned else "")
        + "\n"
    )


def render_problems(console: Console, problems: list[Problem], state_topic: str) -> None:
    """One row per record (or run) of the state topic that cannot be read."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"unreadable records on {state_topic}"), title_justify="left", expand=False)
    for column in ("record", "key", "why"):
        table.add_column(column, overflow="fold")
    for problem in problems:
        table.add_row(Text(problem.at), Text(repr(problem.key)), Text(problem.reason))
    console.print(table)


async def read_state(
    conn: KafkaConnection, settings: ServiceSettings, runs: list[str]
) -> tuple[StateRead, Counter[str], Counter[str]]:
    """The runs' VIEWs (and what cannot be read) and the count of each run's dead letters (runs
    filters both); decoded within the processor's limits."""
    from ckptlog.client.dead_letters import count_by_run, read_dead_letters
    from ckptlog.client.event_warnings import count_warnings, read_warnings
    from ckptlog.events.codec import DecodeLimits
    from ckptlog.processor.service.views import read_state_topic

    limits = DecodeLimits(settings.max_payload_bytes, settings.max_depth)
    state = await read_state_topic(conn, settings.state_topic, runs, limits)
    counts = count_by_run(await read_dead_letters(conn, settings.dlq_topic, limits=limits))
    warned = count_warnings(await read_warnings(conn, settings.checkpoints_topic))

    def wanted(found: Counter[str]) -> Counter[str]:
        return Counter({r: n for r, n in found.items() if not runs or r in runs})

    return state, wanted(counts), wanted(warned)


@app.command(
    "inspect",
    help="Print each run's VIEW from the state topic (last value per run wins) and how many of its events "
    "were rejected or caused warnings. The VIEW is the shape `ckptlog fold` prints (docs/contract.md §4).",
)
@settings_options(["bootstrap_servers", "state_topic", "dlq_topic", "input_topic", "snapshots"])
def inspect_command(
    runs: Annotated[list[str] | None, typer.Argument(help="Run ids (default: every run).")] = None,
    as_json: Annotated[bool, Opt("--json", help=f"Print one JSON object: {JSON_SHAPE}.")] = False,
    as_of: Annotated[
        str | None,
        Opt(
            "--as-of",
            help="The state right after this input offset (of each run's partition) or time: replayed from the "
            "newest snapshot at or before it (--snapshots) and the input topic, not read from the state topic.",
        ),
    ] = None,
    prefix: Annotated[str | None, Opt("--prefix", help="Only runs whose id starts with this.")] = None,
    limit: Annotated[
        int | None,
        Opt("--limit", help="Show at most N runs, in run id order (default 100 as tables, all as JSON; 0: all)."),
    ] = None,
    checkpoints: Annotated[
        int,
        Opt(
            "--checkpoints",
            help="Tables: at most the N best-ranked kept checkpoints of a run, and its latest; a row counts the "
            "rest (0: all). --json always has every one.",
        ),
    ] = DEFAULT_CHECKPOINTS,
    wide: Annotated[
        bool, Opt("--wide", help="Tables: full checkpoint paths and every metric (default: cut to fit).")
    ] = False,
    *,
    settings: ServiceSettings,
) -> None:
    """The current VIEW of runs (the command's help is in the decorator, to share JSON_SHAPE)."""
    import asyncio

    from ckptlog.client.connect import require_bootstrap

    with cli_errors():
        register_secrets(settings.secrets())  # masked in whatever this command writes to stderr
        conn = settings.connection(require_bootstrap(settings.bootstrap_servers))
        if as_of is not None:
            state, rejected, warned = _as_of(conn, settings, runs or [], as_of)
        else:
            state, rejected, warned = asyncio.run(read_state(conn, settings, runs or []))
    if limit is None:  # runs named on the command line are all shown
        limit = 0 if as_json or runs else DEFAULT_LIMIT
    views, hidden = _page(state.views, prefix, limit)
    if as_json:
        body = json_body(views, rejected, warned, state.problems)
        sys.stdout.write(json.dumps(body, allow_nan=True) + "\n")
    else:
        where = settings.state_topic if as_of is None else f"{settings.input_topic} as of {as_of}"
        tables = Tables(checkpoints, wide, settings.state_topic)
        _print_tables(views, state, rejected, warned, tables, where + (f" starting with {prefix!r}" if prefix else ""))
    if hidden:
        echo_err(f"... and {hidden} more runs: narrow with --prefix, or --limit 0 for all of them")
    if as_of is None:
        _warn_missing(runs or [], state, rejected, settings.state_topic)
    else:
        _warn_missing_as_of(runs or [], views, rejected, settings.input_topic, as_of)
    if set(runs or ()) - set(views):
        raise typer.Exit(1)


@dataclass(frozen=True, slots=True)
class Tables:
    """How `inspect` prints tables: at most `checkpoints` rows a run (0: all), `wide` in full."""

    checkpoints: int
    wide: bool
    state_topic: str


def _print_tables(
    views: dict[str, View], state: StateRead, rejected: Counter[str], warned: Counter[str], how: Tables, where: str
) -> None:
    """Each run's table, the records that cannot be read, or that there is no run (on `where`)."""
    from rich.console import Console
    from rich.text import Text

    console = Console()
    for run_id, view in views.items():
        render(console, run_id, view, rejected[run_id], warned[run_id], how.checkpoints, how.wide)
    if state.problems:
        render_problems(console, state.problems, how.state_topic)
    if not views:
        console.print(Text(f"no runs on {where}"))


def json_body(
    views: dict[str, View], rejected: Counter[str], warned: Counter[str], problems: list[Problem]
) -> dict[str, Any]:
    """The object `inspect --json` prints (JSON_SHAPE)."""
    return {
        "runs": views,
        "rejections": dict(sorted(rejected.items())),
        "warnings": dict(sorted(warned.items())),
        "undecodable": [p.to_json() for p in problems],
    }


DEFAULT_LIMIT = 100  # runs shown as tables: 10,000 of them would scroll for minutes


def _page(views: dict[str, View], prefix: str | None, limit: int) -> tuple[dict[str, View], int]:
    """The runs to show, in run id order (`limit` 0: all), and how many matching ones are left out."""
    matching = sorted(run_id for run_id in views if prefix is None or run_id.startswith(prefix))
    shown = matching if limit <= 0 else matching[:limit]
    return {run_id: views[run_id] for run_id in shown}, len(matching) - len(shown)


def _as_of(
    conn: KafkaConnection, settings: ServiceSettings, runs: list[str], moment: str
) -> tuple[StateRead, Counter[str], Counter[str]]:
    """What `read_state` gives, for the state right after `moment` (ckptlog/processor/explain/source.py)."""
    import asyncio

    from ckptlog.cli.history import parse_moment, progress_bar, require_text  # the replay's: only for --as-of
    from ckptlog.processor.explain.source import views_as_of
    from ckptlog.processor.service.views import StateRead

    for run_id in runs:
        require_text(run_id, "run id")
    parsed = parse_moment(moment, "--as-of")
    assert parsed is not None
    with progress_bar() as progress:
        found = asyncio.run(views_as_of(conn, settings, runs, parsed, progress))
    echo_err(f"as of {moment}: replayed {replayed_text(settings.input_topic, found.positions)}")
    return StateRead(found.views, []), +Counter(found.rejected), +Counter(found.warned)


def replayed_text(topic: str, ends: dict[int, int]) -> str:
    """What an --as-of replay read, per partition: `ends` are exclusive, so the last record read is
    the one before (`--as-of 37` reads through offset 37, not "up to 38")."""
    read = [
        f"{topic}[{p}] through offset {end - 1}" if end else f"no record of {topic}[{p}]"
        for p, end in sorted(ends.items())
    ]
    return ", ".join(read) or "nothing"


def _warn_missing_as_of(
    runs: list[str], views: dict[str, View], rejected: Counter[str], topic: str, as_of: str
) -> None:
    """On stderr: the runs without state at the moment (replayed from `topic`, not the state topic)."""
    for run_id in sorted(set(runs) - set(views)):
        why = f"; {rejected[run_id]} of its events were rejected by then" if rejected[run_id] else ""
        echo_err(
            f"warning: run {run_id!r} had no state as of {as_of} on {topic} (not started by then, finished and "
            f"retired, or forgotten{why}); `ckptlog history {run_id}` shows its events"
        )


def _warn_missing(runs: list[str], state: StateRead, rejected: Counter[str], topic: str) -> None:
    """On stderr: the runs without a view, and why (every event rejected, unreadable, unknown)."""
    unreadable = {p.run_id: p for p in state.problems}
    for run_id in sorted(set(unreadable) - set(state.views)):
        echo_err(
            f"warning: run {run_id!r} has no readable view on {topic}: {unreadable[run_id]}; not a record written by "
            "ckptlog (check what else produces to the topic); the run's next VIEW replaces it"
        )
    for run_id in sorted(set(rejected) - set(state.views) - set(unreadable)):  # every event was rejected
        echo_err(
            f"warning: run {run_id!r} has no view on {topic}: the processor rejected "
            f"{rejected[run_id]} of its events; `ckptlog rejections {run_id}` shows why"
        )
    for run_id in sorted(set(runs) - set(state.views) - set(rejected) - set(unreadable)):
        echo_err(f"warning: run {run_id!r} has no view on {topic}; check the run id")
