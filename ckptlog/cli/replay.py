"""`ckptlog replay`: rebuild all partitions' state into a fresh snapshot set, publishing nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ckptlog.cli.errors import cli_errors
from ckptlog.cli.main import app
from ckptlog.cli.options import fields_of, settings_options

if TYPE_CHECKING:  # the replay loads when the command runs, not for its --help (issue 38 item 8)
    from rich.progress import TaskID

    from ckptlog.kafka.records import PartitionId
    from ckptlog.processor.service.settings import ServiceSettings

REPLAY_GROUPS = ("connection", "group", "topics", "fold", "snapshots")

Opt = typer.Option


@app.command("replay")
@settings_options([f for f in fields_of(REPLAY_GROUPS) if f != "snapshots"])
def replay_command(
    snapshots: Annotated[str, Opt(help="fsspec URL of the NEW snapshot set to write.")],
    from_snapshot: Annotated[
        str | None, Opt(help="Start from the newest valid snapshot under this URL instead of the log start.")
    ] = None,
    *,
    settings: ServiceSettings,
) -> None:
    """Fold every input partition from the log start (or a snapshot) into one new snapshot each.

    Takes the processor's settings (the same flags, CKPTLOG_* variables and --config file as
    `ckptlog run`): the fold settings must be the service's, or it refuses the snapshots."""
    import asyncio

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from ckptlog.client.connect import require_bootstrap
    from ckptlog.processor.service.replay import rebuild

    with cli_errors():
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
