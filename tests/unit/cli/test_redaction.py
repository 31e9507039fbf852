"""Issue 20: the fatal-error echo of `ckptlog run` and `cli_errors` wrote exception text without
redaction, and secrets shorter than 4 characters were never masked. Now every line a command writes
to stderr passes through `redact` (echo_err, and a redacting sys.stderr installed by main), and a
registered secret of any length is masked where it stands as a whole value."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
import typer
from typer.testing import CliRunner

from ckptlog.cli.errors import RedactedStderr, cli_errors
from ckptlog.errors import CkptlogError, ConfigError
from ckptlog.processor.redaction import clear_secrets, redact, register_secrets


@pytest.fixture(autouse=True)
def no_registered_secrets() -> Iterator[None]:
    yield
    clear_secrets()


LEAKY = "login failed: sasl_plain_password=pw user='pw' kafka://pw@h sasl://u:pw@h2 x: pw; {'p': \"pw\"}"


def test_a_short_secret_is_masked_wherever_it_stands_as_a_value() -> None:
    register_secrets(["pw", "q"])
    masked = redact(LEAKY)
    assert "pw" not in masked.replace("password", ""), masked
    assert redact("a=q and 'q' but not quick, queue or q-tips") == "a=*** and '***' but not quick, queue or q-tips"
    assert redact("pwd printed, upward, the pw of it") == "pwd printed, upward, the pw of it"  # words stay


def test_a_long_secret_is_masked_anywhere() -> None:
    register_secrets(["hunter22"])
    assert redact("xhunter22y") == "x***y"


@pytest.mark.parametrize("error", [ConfigError(LEAKY), CkptlogError(LEAKY)])
def test_cli_errors_redact(error: CkptlogError, capsys: pytest.CaptureFixture[str]) -> None:
    register_secrets(["pw"])
    with pytest.raises(typer.Exit), cli_errors():
        raise error
    err = capsys.readouterr().err
    assert err.startswith("error: login failed") and "pw" not in err.replace("password", ""), err


def test_the_fatal_error_of_run_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    from ckptlog.cli import run
    from ckptlog.cli.main import app

    async def fatal(settings: object) -> None:
        raise CkptlogError("cannot authenticate with password 'pw' to sasl://ckptlog:pw@broker:9093")

    monkeypatch.setattr(run, "serve", fatal)
    monkeypatch.setenv("CKPTLOG_SASL_PLAIN_PASSWORD", "pw")
    monkeypatch.setenv("CKPTLOG_SASL_PLAIN_USERNAME", "ckptlog")  # a password without SASL is refused (issue 21)
    monkeypatch.setenv("CKPTLOG_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    result = CliRunner().invoke(app, ["run", "--bootstrap-servers", "127.0.0.1:1"])
    assert result.exit_code == 1
    assert "error: cannot authenticate" in result.stderr and "pw" not in result.stderr.replace("password", "")


def test_redacted_stderr_holds_a_partial_line_until_it_ends() -> None:
    register_secrets(["pw"])

    class Sink:
        text = ""

        def write(self, text: str) -> int:
            self.text += text
            return len(text)

        def flush(self) -> None:
            return None

    sink = Sink()
    stream = RedactedStderr(sink)  # type: ignore[arg-type]
    stream.write("token=")
    stream.write("p")
    stream.write("w rest\nnext: pw")
    assert sink.text == "token=*** rest\n"
    stream.flush()
    assert sink.text == "token=*** rest\nnext: ***"


def test_whatever_writes_to_stderr_after_main_is_redacted() -> None:
    """A traceback, a warning, a library's print: not only the messages ckptlog formats."""
    code = """
import sys
sys.argv = ["ckptlog", "topics", "--help"]
from ckptlog.cli.main import main
from ckptlog.processor.redaction import register_secrets
register_secrets(["pw"])
try:
    main()
except SystemExit:
    pass
print("failed: password: pw at kafka://u:pw@h", file=sys.stderr)
raise RuntimeError("uncaught, with token='pw'")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "failed: password: *** at kafka://u:***@h" in done.stderr
    assert "RuntimeError: uncaught, with token='***'" in done.stderr
    assert "pw" not in done.stderr.replace("password", ""), done.stderr
