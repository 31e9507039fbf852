"""Every subcommand maps ckptlog's errors to exit codes the same way."""

from __future__ import annotations

import pytest
import typer

from ckptlog.cli.clients import UsageError
from ckptlog.cli.errors import cli_errors
from ckptlog.errors import BrokerError, CkptlogError, ConfigError


@pytest.mark.parametrize(
    "error, code",
    [
        (ConfigError("bad flag"), 2),
        (UsageError("bad usage"), 2),
        (BrokerError("no broker"), 1),
        (CkptlogError("boom"), 1),
    ],
)
def test_errors_become_exit_codes_with_the_message(
    error: CkptlogError, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit) as exit_info, cli_errors():
        raise error
    assert exit_info.value.exit_code == code
    assert capsys.readouterr().err.strip() == f"error: {error}"


def test_other_exceptions_are_not_swallowed() -> None:
    with pytest.raises(KeyError), cli_errors():
        raise KeyError("bug")
