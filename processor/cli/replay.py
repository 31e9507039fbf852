"""`ckptlog replay`: rebuild all partitions' state into a fresh snapshot set, publishing nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from ckptlog.connect import require_bootstrap
from processor.cli.errors import cli_errors
from processor.cli.main import app
from processor.kafka.records import PartitionId
from processor.service.replay import rebuild
from processor.service.settings import load_settings

Opt = typer.Option


@app.command("replay")
def replay_command(
    snapshots: Annotated[str, Opt(help="fsspec URL of the NEW snapshot set to write.")],
    from_snapshot: Annotated[
        str | None, Opt(help="Start from the newest valid snapshot under this URL instead of the log start.")
    ] = None,
    config: Annotated[Path | None, Opt("--config", help="TOML or JSON settings file (as for run).")] = None,
    bootstrap_servers: Annotated[
        str | None,
        Opt(help="Kafka host:port list (default: $KAFKA_BOOTSTRAP_SERVERS, else a running `ckptlog broker start`)."),
    ] = None,
    input_topic: Annotated[str | None, Opt(help="Default ckptlog.events.")] = None,
    storage_root: Annotated[str | None, Opt(help="As for run: must match the service's.")] = None,
    default_num_to_keep: Annotated[int | None, Opt(help="As for run.")] = None,
    score_attribute: Annotated[str | None, Opt(help="As for run.")] = None,
    score_order: Annotated[str | None, Opt(help="As for run.")] = None,
    allow_data_loss: Annotated[bool | None, Opt("--allow-data-loss/--no-allow-data-loss")] = None,
) -> None:
    """Fold every input partition from the log start (or a snapshot) into one new snapshot each."""
    with cli_errors():
        settings = load_settings(
            config,
            bootstrap_servers=bootstrap_servers,
            input_topic=input_topic,
            storage_root=storage_root,
            default_num_to_keep=default_num_to_keep,
            score_attribute=score_attribute,
            score_order=score_order,
            allow_data_loss=allow_data_loss,
        )
        bootstrap = require_bootstrap(settings.bootstrap_servers)
    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        tasks: dict[PartitionId, TaskID] = {}

        def progress(pid: PartitionId, position: int, begin: int, end: int) -> None:
            if pid not in tasks:
                tasks[pid] = bar.add_task(str(pid), total=max(0, end - begin))
            bar.update(tasks[pid], completed=min(max(0, position - begin), max(0, end - begin)))

        with cli_errors():
            results = asyncio.run(rebuild(settings, bootstrap, snapshots, from_snapshot, progress))
    for r in results:
        if r.url is None:
            typer.echo(
                f"{r.pid}: no snapshot: group {settings.group_id} has no committed offset there, so the processor "
                "folds it from the log start and publishes every output"
            )
            continue
        typer.echo(
            f"{r.pid}: {r.events} events from offset {r.start} -> snapshot at {r.next_offset} (the group's committed "
            f"offset; {r.runs} runs): {r.url}"
        )
