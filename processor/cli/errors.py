"""One mapping from ckptlog's exception root to exit codes, shared by every subcommand."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer

from processor.errors import CkptlogError, ConfigError


@contextmanager
def cli_errors() -> Iterator[None]:
    """Print `error: …` and exit 2 for a flag/config problem, 1 for any other ckptlog error."""
    try:
        yield
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except CkptlogError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
