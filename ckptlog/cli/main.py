"""The `ckptlog` command line: one typer app, subcommands registered per concern."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import typer

app = typer.Typer(
    name="ckptlog",
    help="Event-sourced checkpoint manager for ML training, on Kafka.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's plain help: it wraps at any width, where rich's tables cut flag names at 80 columns
    rich_markup_mode=None,
)


#: Command name -> the module that registers it. `ckptlog CMD` imports only that module, and a
#: command module imports only typer and light helpers at import: what a command uses (aiokafka,
#: the models, fsspec, rich, aiohttp) it imports when it runs, so --help and argument errors answer
#: in ~0.25 s (issue 38 item 8). tests/unit/cli/test_main.py checks this table against what the
#: modules register, and that --help loads none of those.
COMMAND_MODULES = {
    "fold": "fold",
    "broker": "broker",
    "run": "run",
    "inspect": "inspect",
    "replay": "replay",
    "history": "history",
    "explain": "history",
    "rejections": "rejections",
    "export": "export",
    "topics": "topics",
    "report": "clients",
    "start-run": "clients",
    "worker-group-restart": "clients",
    "evaluate": "evaluate",
    "watch": "clients",
    "finish": "finish",
    "forget": "finish",
    "reopen": "finish",
    "demo": "demo",
    "ui": "ui",
    "adopt-ray": "adopt",
}


@app.callback()
def _group() -> None:
    """Event-sourced checkpoint manager for ML training, on Kafka."""  # keeps `ckptlog CMD` a group


def _register(argv: Sequence[str] = ()) -> None:
    """Import the subcommand module(s) so they attach themselves to `app`: the one named on the
    command line; none for a word that names no command (click says so); all of them for --help
    or no command, which list them. Each is cheap to import: a command imports what it uses when
    it runs (issue 38 item 8; tests/unit/cli/test_main.py checks --help loads none of it)."""
    import importlib

    named = COMMAND_MODULES.get(argv[0]) if argv else None
    if argv and named is None and not argv[0].startswith("-"):
        return
    for module in [named] if named else dict.fromkeys(COMMAND_MODULES.values()):
        importlib.import_module(f"ckptlog.cli.{module}")


def main() -> None:
    from ckptlog.cli.errors import redact_stderr

    redact_stderr()  # every line written to stderr passes through redact, whoever writes it
    _register(sys.argv[1:])
    app()
