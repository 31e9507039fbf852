"""The `ckptlog` command line: one typer app, subcommands registered per concern."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="ckptlog",
    help="Event-sourced checkpoint manager for ML training, on Kafka.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    """Import subcommand modules so they attach themselves to `app`."""
    import importlib

    for name in ("fold", "broker", "run", "inspect", "replay", "clients", "demo"):
        try:
            importlib.import_module(f"processor.cli.{name}")
        except ModuleNotFoundError as exc:  # a subcommand module not written yet
            if exc.name != f"processor.cli.{name}":
                raise


def main() -> None:
    _register()
    app()
