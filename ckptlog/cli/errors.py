"""One mapping from ckptlog's exception root to exit codes, shared by every subcommand, and the one
way a command writes to stderr: through `redact` (ckptlog/processor/redaction.py), so that no secret
(a SASL password, a storage key, URL credentials) reaches a terminal or a log collector."""

from __future__ import annotations

import atexit
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import typer

from ckptlog.errors import CkptlogError, ConfigError
from ckptlog.processor.redaction import redact


def echo_err(text: str) -> None:
    """Write one message to stderr, redacted."""
    typer.echo(redact(text), err=True)


@contextmanager
def cli_errors() -> Iterator[None]:
    """Print `error: …` and exit 2 for a flag/config problem, 1 for any other ckptlog error."""
    try:
        yield
    except ConfigError as exc:
        echo_err(f"error: {exc}")
        raise typer.Exit(2) from None
    except CkptlogError as exc:
        echo_err(f"error: {exc}")
        raise typer.Exit(1) from None


class RedactedStderr:
    """`sys.stderr` for the `ckptlog` command (installed by ckptlog.cli.main): every complete line
    is written through `redact`, whatever wrote it — typer and click (usage errors), rich consoles,
    logging, warnings, a traceback. A partial line is held until its newline, or a flush."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self._pending = stream, ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            done, self._pending = self._pending.rsplit("\n", 1)
            self.stream.write(redact(done) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self.stream.write(redact(self._pending))
            self._pending = ""
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ...: the real stream's
        return getattr(self.stream, name)


def redact_stderr() -> None:
    """Route this process's stderr through `RedactedStderr` (idempotent)."""
    if not isinstance(sys.stderr, RedactedStderr):
        sys.stderr = RedactedStderr(sys.stderr)
        atexit.register(sys.stderr.flush)
