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


async def test_an_idle_runs_finish_is_named_by_the_epoch_its_view_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """contract §3 "Reopened runs": a reopened run's next finish has an id of its own (`reopened`
    on its VIEW), which --idle-for takes from the VIEWs it read anyway."""
    from ckptlog.cli import idle
    from ckptlog.processor.service.views import StateRead

    views = {"fresh": {"committed": 1}, "again": {"committed": 4, "reopened": 2}, "done": {"finished": True}}
    read = StateRead(views=views, written_ms=dict.fromkeys(views, 0))

    async def state_topic(*args: object, **kwargs: object) -> StateRead:
        return read

    monkeypatch.setattr(idle, "read_state_topic", state_topic)
    found = await idle.idle_runs(None, "state", 60.0, now=3600.0)  # type: ignore[arg-type]
    assert {(r.run_id, r.epoch) for r in found} == {("fresh", 0), ("again", 2)}
