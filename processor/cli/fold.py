"""`ckptlog fold`: fold a file of events offline and print every run's VIEW."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH
from events.decoded import CheckpointConfig
from events.paths import root_problem
from processor.cli.errors import cli_errors
from processor.cli.main import app
from processor.core.state import FoldSettings
from processor.errors import ConfigError
from processor.foldfile import auto_workers, fold_file_text, fold_stream_text


def settings_from_flags(
    keep: int | None,
    attribute: str | None,
    order: str,
    root: str | None,
    max_payload_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> FoldSettings:
    """Processor defaults from CLI flags, with a clear error for invalid ones."""
    if max_payload_bytes < 1 or max_depth < 1:
        raise ConfigError(
            f"--max-payload-bytes and --max-depth must be >= 1 (got {max_payload_bytes}, {max_depth}); "
            "omit them for the processor's defaults"
        )
    if keep is not None and keep < 1:
        raise ConfigError(f"--default-num-to-keep must be >= 1 (got {keep}); omit it to keep every checkpoint")
    if order not in ("max", "min"):
        raise ConfigError(f"--score-order must be 'max' or 'min' (got {order!r})")
    problem = root_problem(root) if root is not None else None
    if problem is not None:
        raise ConfigError(f"--storage-root {problem}; give the directory every run's checkpoints live under")
    if attribute == "":
        raise ConfigError("--score-attribute must not be empty; omit it to keep checkpoints in report order")
    config = CheckpointConfig(num_to_keep=keep, checkpoint_score_attribute=attribute, checkpoint_score_order=order)  # type: ignore[arg-type]
    return FoldSettings(
        default_config=config,
        default_root=root,
        outer_root=root,
        max_payload_bytes=max_payload_bytes,
        max_depth=max_depth,
    )


@app.command("fold")
def fold_command(
    file: Annotated[str, typer.Argument(help="File of CloudEvents JSON lines, or - for stdin.")] = "-",
    apply: Annotated[bool, typer.Option("--apply", help="Delete evicted checkpoints (default: dry run).")] = False,
    default_num_to_keep: Annotated[int | None, typer.Option(help="num_to_keep for runs with no run_started.")] = None,
    score_attribute: Annotated[str | None, typer.Option(help="Score metric for runs with no run_started.")] = None,
    score_order: Annotated[str, typer.Option(help="max or min, for runs with no run_started.")] = "max",
    storage_root: Annotated[
        str | None, typer.Option(help="Root for runs with no run_started; outer bound for deletions.")
    ] = None,
    max_payload_bytes: Annotated[int, typer.Option(help="Reject events larger than this.")] = DEFAULT_MAX_BYTES,
    max_depth: Annotated[int, typer.Option(help="Reject JSON nested deeper than this.")] = DEFAULT_MAX_DEPTH,
    indent: Annotated[int | None, typer.Option(help="Pretty-print with this indent.")] = None,
    workers: Annotated[
        int, typer.Option(help="Processes, each folding a shard of the runs; 0 = one per core for files over 16 MiB.")
    ] = 0,
    progress: Annotated[
        bool | None,
        typer.Option("--progress/--no-progress", help="Show progress on stderr (default: when stderr is a terminal)."),
    ] = None,
) -> None:
    """Fold events offline; print {"runs": {RUN_ID: VIEW}, "rejected": [...]}."""
    with cli_errors():
        settings = settings_from_flags(
            default_num_to_keep, score_attribute, score_order, storage_root, max_payload_bytes, max_depth
        )
        if apply and storage_root is None:
            raise ConfigError(
                "--apply deletes from storage, so it needs --storage-root: the directory (or bucket prefix) every "
                "run's checkpoints live under, the outer bound no deletion may leave (contract §9)"
            )
    if file == "-":
        text, deletions = fold_stream_text(sys.stdin.buffer, settings, indent=indent)
    else:
        path = Path(file)
        if not path.is_file():
            typer.echo(f"error: {file}: no such file; give a file of JSON lines or - for stdin", err=True)
            raise typer.Exit(2)
        text, deletions = fold_file_text(
            path,
            settings,
            workers=workers or auto_workers(path),
            with_deletions=apply,
            indent=indent,
            progress=sys.stderr.isatty() if progress is None else progress,
        )
    failures: list[str] = []
    if apply and deletions:
        from processor.storage.apply import delete_now

        failures = delete_now(deletions, outer_root=storage_root)
        for message in failures:
            typer.echo(f"error: {message}", err=True)
    sys.stdout.write(text + "\n")
    if failures:
        raise typer.Exit(1)
