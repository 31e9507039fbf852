"""Every command's --help reads at 80 columns: no line wider, every flag name whole, every flag
explained (issue 21 item 9: rich's tables cut `--default-num-to-keep` to `--default-num-to-ke…`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import pytest
import typer

from ckptlog.cli.main import COMMAND_MODULES, _register, app

_register()  # every command module attaches itself
_COMMANDS: Any = typer.main.get_command(app)  # typer's own (vendored) click group


def _leaves() -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for name, command in sorted(_COMMANDS.commands.items()):
        if hasattr(command, "commands"):
            found += [(f"{name} {sub}", c) for sub, c in sorted(command.commands.items())]
        else:
            found.append((name, command))
    return found


def _help(words: str) -> str:
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    code = "from ckptlog.cli.main import main; main()"
    argv = [sys.executable, "-c", code, *words.split(), "--help"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    return done.stdout


@pytest.mark.parametrize("words", ["run", "inspect", "start-run", "replay", "broker start"])
def test_help_fits_80_columns_and_names_every_flag_whole(words: str) -> None:
    text = _help(words)
    assert max(map(len, text.splitlines())) <= 80, text
    assert "…" not in text
    command = dict(_leaves())[words]
    for param in command.params:
        for flag in param.opts:
            if flag.startswith("--"):
                assert re.search(rf"(^|[\s,/]){re.escape(flag)}([\s,=/]|$)", text, re.M), (flag, text)


@pytest.mark.parametrize(("words", "command"), _leaves())
def test_every_flag_has_a_help_text(words: str, command: Any) -> None:
    for param in command.params:
        if getattr(param, "param_type_name", "") == "option" and param.name != "help":
            assert (param.help or "").strip(), f"ckptlog {words} {param.opts[0]} has no help"


def test_run_help_says_where_settings_come_from() -> None:
    text = _help("run")
    assert "CKPTLOG_" in text and "--config" in text and "--security-protocol" in text


def test_every_command_of_the_table_has_help() -> None:
    for name in COMMAND_MODULES:
        assert (_COMMANDS.commands[name].get_short_help_str() or "").strip(), name
