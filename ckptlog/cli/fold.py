"""`ckptlog fold`: fold a file of events offline and print every run's VIEW."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ckptlog.cli.errors import cli_errors
from ckptlog.cli.main import app
from ckptlog.cli.options import fields_of, settings_options
from ckptlog.errors import ConfigError
from ckptlog.processor.whatif import Override

if TYPE_CHECKING:  # the fold loads when the command runs, not for its --help (issue 38 item 8)
    from ckptlog.processor.service.settings import ServiceSettings


@app.command("fold")
@settings_options(fields_of(["fold"]))
def fold_command(
    file: Annotated[str, typer.Argument(help="File of CloudEvents JSON lines, or - for stdin.")] = "-",
    apply: Annotated[bool, typer.Option("--apply", help="Delete evicted checkpoints (default: dry run).")] = False,
    indent: Annotated[int | None, typer.Option(help="Pretty-print with this indent.")] = None,
    workers: Annotated[
        int, typer.Option(help="Processes, each folding a shard of the runs; 0 = one per core for files over 16 MiB.")
    ] = 0,
    progress: Annotated[
        bool | None,
        typer.Option("--progress/--no-progress", help="Show progress on stderr (default: when stderr is a terminal)."),
    ] = None,
    override_num_to_keep: Annotated[
        int | None,
        typer.Option(min=1, help="What-if: every run keeps N, its run_started's num_to_keep overridden."),
    ] = None,
    override_score_attribute: Annotated[
        str | None, typer.Option(help="What-if: every run ranks by this metric (nested: val/loss).")
    ] = None,
    override_score_order: Annotated[
        str | None, typer.Option(help="What-if: every run's score order, max or min.")
    ] = None,
    *,
    settings: ServiceSettings,
) -> None:
    """Fold events offline; print {"runs": {RUN_ID: VIEW}, "rejected": [...]}.

    With the processor's fold settings (the same flags, CKPTLOG_* variables and --config file
    as `ckptlog run`), it prints what the processor makes of the same log; the --override-*
    flags fold it as if every run had sent other retention (a what-if; never with --apply)."""
    from ckptlog.processor.foldfile import auto_workers, fold_file_text, fold_stream_text

    storage_root = settings.storage_root
    override = Override(override_num_to_keep, override_score_attribute or None, override_score_order)
    with cli_errors():
        _check(apply, storage_root, override)
    fold_settings = settings.model_copy(update=override.defaults()).fold_settings()
    if file == "-":
        text, deletions = fold_stream_text(sys.stdin.buffer, fold_settings, indent=indent, override=override)
    else:
        path = Path(file)
        if not path.is_file():
            typer.echo(f"error: {file}: no such file; give a file of JSON lines or - for stdin", err=True)
            raise typer.Exit(2)
        text, deletions = fold_file_text(
            path,
            fold_settings,
            workers=workers or auto_workers(path),
            with_deletions=apply,
            indent=indent,
            progress=sys.stderr.isatty() if progress is None else progress,
            override=override,
        )
    failures: list[str] = []
    if apply and deletions:
        from ckptlog.processor.storage.apply import delete_now

        failures = delete_now(deletions, outer_root=storage_root)
        for message in failures:
            typer.echo(f"error: {message}", err=True)
    sys.stdout.write(text + "\n")
    if failures:
        raise typer.Exit(1)


def _check(apply: bool, storage_root: str | None, override: Override) -> None:
    """--apply deletes: only within --storage-root, and only what the log really evicts."""
    if apply and storage_root is None:
        raise ConfigError(
            "--apply deletes from storage, so it needs --storage-root: the directory (or bucket prefix) every "
            "run's checkpoints live under, the outer bound no deletion may leave (contract §9)"
        )
    if apply and override.config():
        raise ConfigError(
            "--apply with --override-*: a what-if fold's evictions are not the runs' own, so it deletes nothing; "
            "drop --apply to see what the override would keep"
        )
    if override.score_order not in (None, "max", "min"):
        raise ConfigError(f"--override-score-order must be max or min (got {override.score_order!r})")
