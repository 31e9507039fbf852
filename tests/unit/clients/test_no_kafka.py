"""With no Kafka configured and no local broker running, every client and client command fails
at once with one message, and starts nothing: no broker, no process, no broker directory."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckptlog import AsyncEvaluator, AsyncReader, AsyncReporter, NoKafkaConfigured, Reader, Reporter
from ckptlog.broker import LocalBroker
from ckptlog.cli.main import _register, app
from ckptlog.client.errors import ClientError
from ckptlog.errors import CkptlogError, ConfigError
from ckptlog.kafka.discovery import ENV_BOOTSTRAP

NO_KAFKA = "no Kafka configured: set KAFKA_BOOTSTRAP_SERVERS or run `ckptlog broker start`"
REPO = Path(__file__).resolve().parents[3]


def _ppid(pid: str) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def children() -> set[int]:
    """Pids whose parent is this process."""
    me = os.getpid()
    return {int(pid) for pid in os.listdir("/proc") if pid.isdigit() and _ppid(pid) == me}


def processes_naming(path: Path) -> list[int]:
    """Pids whose command line mentions `path` (a broker started there would: its config is in it)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if str(path).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.fixture
def no_kafka(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No bootstrap anywhere, an empty $CKPTLOG_HOME, and any broker start or process spawn is
    recorded (and fails); afterwards nothing may have been started or created."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("CKPTLOG_HOME", str(home))
    for name in ENV_BOOTSTRAP:
        monkeypatch.delenv(name, raising=False)
    launched: list[str] = []

    def forbidden(what: str) -> Any:
        def refuse(*args: object, **kwargs: object) -> None:
            launched.append(what)
            raise AssertionError(f"a client tried to {what}")

        return refuse

    monkeypatch.setattr(LocalBroker, "start", forbidden("start the local broker"))
    monkeypatch.setattr(subprocess, "Popen", forbidden("spawn a process"))
    before = children()
    yield home
    assert launched == []
    assert children() <= before
    assert list(home.iterdir()) == []  # no broker directory, no broker.json
    assert processes_naming(home) == []


@contextmanager
def at_once() -> Iterator[None]:
    started = time.monotonic()
    yield
    assert time.monotonic() - started < 5


def test_the_error_is_a_client_error_and_a_config_error() -> None:
    error = NoKafkaConfigured()
    assert str(error) == NO_KAFKA
    assert isinstance(error, ClientError) and isinstance(error, ConfigError) and isinstance(error, CkptlogError)


def test_reporter_fails_at_once(no_kafka: Path) -> None:
    """`Reporter("r")` itself fails: a training script learns at start-up, not at its first report."""
    with at_once(), pytest.raises(NoKafkaConfigured) as info:
        Reporter("r")
    assert str(info.value) == NO_KAFKA
    with at_once(), pytest.raises(NoKafkaConfigured, match="^no Kafka configured"), Reporter("r"):
        pass
    assert "ckptlog-reporter-r" not in {t.name for t in threading.enumerate()}


async def test_async_reporter_fails_at_once(no_kafka: Path) -> None:
    with at_once(), pytest.raises(NoKafkaConfigured) as info:
        async with AsyncReporter("r"):
            pass
    assert str(info.value) == NO_KAFKA


async def test_reader_fails_at_once(no_kafka: Path) -> None:
    with at_once(), pytest.raises(NoKafkaConfigured) as info:
        async with AsyncReader():
            pass
    assert str(info.value) == NO_KAFKA


def test_sync_reader_fails_at_once(no_kafka: Path) -> None:
    with at_once(), pytest.raises(NoKafkaConfigured) as info:
        Reader()
    assert str(info.value) == NO_KAFKA


async def test_evaluator_fails_at_once(no_kafka: Path) -> None:
    evaluator = AsyncEvaluator(lambda path: {"ok": 1})
    with at_once(), pytest.raises(NoKafkaConfigured) as info:
        await evaluator.run()
    assert str(info.value) == NO_KAFKA


@pytest.mark.parametrize(
    "args",
    [
        ["report", "r", "-m", "loss=1"],
        ["start-run", "r", "/runs/r"],
        ["worker-group-restart", "r", "--num-workers", "2"],
        ["evaluate", "--fn", "ckptlog.demo.validation:validate_checkpoint"],
        ["watch", "r"],
        ["watch", "r", "--once"],
        ["inspect"],
        ["replay", "--snapshots", "memory://ckptlog-no-kafka"],
        ["rejections"],
        ["export", "-"],
        ["topics", "--check"],
        ["report", "r", "-m", "loss=1", "--confirm"],
    ],
    ids=lambda args: "-".join(args[:2]),
)
def test_client_commands_exit_2_with_the_message(args: list[str], no_kafka: Path) -> None:
    _register(args)
    with at_once():
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {NO_KAFKA}\n"
    assert result.stdout == ""
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_the_report_command_as_a_user_runs_it(tmp_path: Path) -> None:
    """A real `ckptlog report` process: one line on stderr, no traceback, exit 2, nothing left."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_BOOTSTRAP}
    env["CKPTLOG_HOME"] = str(tmp_path)
    code = "import sys; from ckptlog.cli.main import main; sys.argv[0] = 'ckptlog'; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "report", "r", "-m", "loss=1"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"error: {NO_KAFKA}\n")
    assert list(tmp_path.iterdir()) == []
    assert processes_naming(tmp_path) == []
