"""The sending commands' flags are one block (issue 40 item 3): `Sending` in ckptlog/cli/clients.py,
given to a command by `sender_options`; a command sending an input event names the block, not its flags."""

from __future__ import annotations

import dataclasses

import pytest
import typer
from typer.testing import CliRunner

from ckptlog.cli.clients import Sending, sender_options
from ckptlog.cli.options import flag
from ckptlog.processor.service.settings import load_settings
from tests.unit.cli.test_options import flags_of

SENDING_FLAGS = {flag(f.name) for f in dataclasses.fields(Sending)}


@pytest.mark.parametrize(
    "command", ["report", "start-run", "worker-group-restart", "finish", "reopen", "forget", "adopt-ray"]
)
def test_every_sending_command_takes_the_block(command: str) -> None:
    assert {"--topic", "--confirm", "--confirm-timeout-s", "--processor-group", "--dlq-topic"} == SENDING_FLAGS
    assert flags_of(command) >= SENDING_FLAGS


def test_a_command_with_the_block_gets_its_flags_as_one_value() -> None:
    got: list[Sending] = []
    app = typer.Typer()

    @app.command()
    @sender_options
    def send(run_id: str, *, send: Sending) -> None:
        got.append(send)

    runner = CliRunner()
    assert runner.invoke(app, ["r"]).exit_code == 0
    argv = ["r", "--topic", "t", "--confirm", "--confirm-timeout-s", "5", "--processor-group", "g", "--dlq-topic", "d"]
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert got == [Sending(), Sending("t", True, 5.0, "g", "d")]


def test_the_reporter_sends_where_the_flags_say_else_where_the_settings_say() -> None:
    settings = load_settings(None, input_topic="in.s", dlq_topic="dlq.s", group_id="group.s", checkpoints_topic="c.s")
    default = Sending().reporter("r", settings)
    assert (default.topic, default.confirm_by_default, default.confirm_timeout_s) == ("in.s", False, 60.0)
    assert (default._processor_group, default._dlq_topic, default._checkpoints_topic) == ("group.s", "dlq.s", "c.s")
    given = Sending("in.f", True, 5.0, "group.f", "dlq.f").reporter("r", settings, generation=3)
    assert (given.topic, given.confirm_by_default, given.confirm_timeout_s, given.generation) == ("in.f", True, 5.0, 3)
    assert (given._processor_group, given._dlq_topic) == ("group.f", "dlq.f")
