"""`ckptlog finish --idle-for`: the duration it takes and the flags it refuses (ckptlog/cli/idle.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ckptlog.cli.idle import idle_text, parse_duration
from ckptlog.cli.main import _register, app
from ckptlog.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("12h", 43200), ("7d", 604800), ("1d12h", 129600), ("2w", 1209600), ("1.5h", 5400)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "7", "d", "7 days", "-1d", "0s", "1d x", "1y", "1e3s"])
def test_bad_durations_say_what_to_give(text: str) -> None:
    with pytest.raises(ConfigError, match="--idle-for"):
        parse_duration(text)


def test_idle_text() -> None:
    assert (idle_text(5), idle_text(7200), idle_text(3 * 86400)) == ("5s", "2.0h", "3.0d")


@pytest.mark.parametrize(
    "args",
    [
        ["finish"],
        ["finish", "r1", "--idle-for", "1d"],
        ["finish", "r1", "--dry-run"],
        ["finish", "r1", "--prefix", "x"],
    ],
)
def test_a_run_or_idle_for_never_both_nor_neither(args: list[str]) -> None:
    _register()
    result = CliRunner().invoke(app, [*args, "--bootstrap-servers", "127.0.0.1:1"])
    assert result.exit_code == 2, result.output
