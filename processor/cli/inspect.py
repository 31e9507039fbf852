"""`ckptlog inspect`: the current VIEW of runs, read from the compacted state topic, and how many
events of each run the processor rejected (its dead-letter topic)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ckptlog.connect import require_bootstrap
from ckptlog.dead_letters import count_by_run, read_dead_letters
from processor.cli.errors import cli_errors
from processor.cli.main import app
from processor.core.view import View
from processor.kafka.connection import KafkaConnection
from processor.service.settings import ServiceSettings, load_settings
from processor.service.views import read_views

Opt = typer.Option


def _metrics(metrics: dict[str, Any]) -> str:
    text = json.dumps(metrics, separators=(",", ":"), allow_nan=True)
    return text if len(text) <= 60 else text[:57] + "..."


def render(console: Console, run_id: str, view: View, rejected: int = 0) -> None:
    table = Table(title=f"run {run_id}", title_justify="left", expand=False)
    for column in ("#", "report", "path", "status", "metrics", ""):
        table.add_column(column)
    for i, ckpt in enumerate(view["checkpoints"]):
        marks = " ".join(
            m for m, hit in (("latest", ckpt["path"] == view["latest"]), ("best", ckpt["path"] == view["best"])) if hit
        )
        table.add_row(str(i), str(ckpt["report_index"]), ckpt["path"], ckpt["status"], _metrics(ckpt["metrics"]), marks)
    console.print(table)
    console.print(
        f"  committed={view['committed']} validated={view['validated']} generation={view['generation']} "
        f"index_in_generation={view['index_in_generation']} latest={view['latest']} best={view['best']}"
        + (f"\n  rejected={rejected} (`ckptlog rejections {run_id}`)" if rejected else "")
        + "\n"
    )


async def read_state(
    conn: KafkaConnection, settings: ServiceSettings, runs: list[str]
) -> tuple[dict[str, View], Counter[str]]:
    """The runs' VIEWs and the count of each run's dead letters (runs filters both)."""
    views = await read_views(conn, settings.state_topic, runs)
    counts = count_by_run(await read_dead_letters(conn, settings.dlq_topic))
    return views, Counter({r: n for r, n in counts.items() if not runs or r in runs})


@app.command("inspect")
def inspect_command(
    runs: Annotated[list[str] | None, typer.Argument(help="Run ids (default: every run).")] = None,
    as_json: Annotated[bool, Opt("--json", help='Print {"runs": {RUN_ID: VIEW}}.')] = False,
    config: Annotated[Path | None, Opt("--config", help="TOML or JSON settings file (as for run).")] = None,
    bootstrap_servers: Annotated[
        str | None,
        Opt(help="Kafka host:port list (default: $KAFKA_BOOTSTRAP_SERVERS, else a running `ckptlog broker start`)."),
    ] = None,
    state_topic: Annotated[str | None, Opt(help="Compacted state topic (default ckptlog.state).")] = None,
    dlq_topic: Annotated[str | None, Opt(help="Dead-letter topic (default ckptlog.dlq).")] = None,
) -> None:
    """Print each run's VIEW from the state topic (last value per run wins) and its rejected events.
    --json: {"runs": {RUN_ID: VIEW}, "rejections": {RUN_ID: count}}."""
    with cli_errors():
        settings = load_settings(
            config, bootstrap_servers=bootstrap_servers, state_topic=state_topic, dlq_topic=dlq_topic
        )
        conn = settings.connection(require_bootstrap(settings.bootstrap_servers))
        views, rejected = asyncio.run(read_state(conn, settings, runs or []))
    if as_json:
        sys.stdout.write(
            json.dumps({"runs": views, "rejections": dict(sorted(rejected.items()))}, allow_nan=True) + "\n"
        )
    else:
        console = Console()
        for run_id, view in views.items():
            render(console, run_id, view, rejected[run_id])
        if not views:
            console.print(f"no runs on {settings.state_topic}")
    for run_id in sorted(set(rejected) - set(views)):  # every event of these runs was rejected
        typer.echo(
            f"warning: run {run_id!r} has no view on {settings.state_topic}: the processor rejected "
            f"{rejected[run_id]} of its events; `ckptlog rejections {run_id}` shows why",
            err=True,
        )
    unknown = sorted(set(runs or ()) - set(views) - set(rejected))
    for run_id in unknown:
        typer.echo(f"warning: run {run_id!r} has no view on {settings.state_topic}; check the run id", err=True)
    if set(runs or ()) - set(views):
        raise typer.Exit(1)
