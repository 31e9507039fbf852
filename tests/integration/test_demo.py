"""`ckptlog demo --no-live` end to end against the test broker, as a user (or CI) runs it."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


async def test_demo_runs_end_to_end_and_its_checks_pass(kafka_bootstrap: str) -> None:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "COLUMNS": "100"}
    started = time.monotonic()
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "ckptlog.cli", "demo", "--no-live", "--pace-s", "0.02"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "all checks passed" in output
    assert "views on the state topic == offline fold of the input log" in output
    assert "evicted checkpoints deleted from disk" in output
    assert "local Kafka broker" not in output, "a configured broker: no local one started, reused or mentioned"
    assert time.monotonic() - started < 60, "the demo should finish well under a minute"


def _cli(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ckptlog.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


SCRIPT = Path(sys.executable).parent / "ckptlog"  # what `make demo` runs: .venv/bin/ckptlog


def _shell(line: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a line the demo printed, as a user pastes it into bash."""
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _console_answers(line: str, env: dict[str, str], cwd: Path) -> str:
    """Start the printed `ui` line (on a free port: 8000 may be taken on a shared machine; the flag is
    repeated, so the last one wins) and return its runs page."""
    command, _, comment = line.partition("  # ")
    assert comment.startswith("then open http://127.0.0.1:8000/"), line
    port = _free_port()
    proc = subprocess.Popen(["bash", "-c", f"exec {command} --port {port}"], cwd=cwd, env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as page:
                    return str(page.read().decode())
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(30)


async def test_after_the_demo_its_runs_can_be_explored_and_the_next_demo_clears_them(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Issue 21 item 5: the README's explore step works with the commands the demo prints, and
    leftovers never pile up: the next demo removes them, `--clean` its own. Issue 38 item 3: the demo
    runs as `make demo` runs it (.venv/bin/ckptlog, the venv not on the PATH) and every command it
    prints runs as printed, pasted into a shell whose PATH lacks the venv, from another directory."""
    assert SCRIPT.is_file(), f"{SCRIPT}: the tests run from the virtualenv `make` installs ckptlog into"
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "CKPTLOG_HOME": str(tmp_path / "home")}
    env |= {"COLUMNS": "200", "NO_COLOR": "1", "PATH": "/usr/bin:/bin"}
    demo = [str(SCRIPT), "demo", "--no-live", "--pace-s", "0", "--runs", "2", "--reports", "6"]
    first = await asyncio.to_thread(
        subprocess.run, demo, cwd=REPO, env=env, capture_output=True, text=True, timeout=180
    )
    assert first.returncode == 0, first.stdout + first.stderr
    lines = first.stdout.split("explore its runs with:\n", 1)[1].splitlines()
    printed = [line[2:] for line in lines if line.startswith("  ")]
    words = [shlex.split(line.partition("  # ")[0]) for line in printed]
    assert [w[0] for w in words] == [str(SCRIPT)] * 5, "not on the PATH: the script's path, runnable as printed"
    assert [w[1] for w in words] == ["inspect", "watch", "history", "rejections", "ui"], first.stdout
    assert all("--config" in w for w in words), "every hint reads the demo's --config file"
    assert f"`source {SCRIPT.parent / 'activate'}` puts it there" in first.stdout, "and how to put it there"
    elsewhere = tmp_path / "elsewhere"  # a new terminal starts elsewhere: the printed lines do not depend on it
    elsewhere.mkdir()
    config, run = Path(words[0][-1]), words[1][2]
    inspected = await asyncio.to_thread(_shell, printed[0] + " --json", env, elsewhere)
    assert inspected.returncode == 0, inspected.stderr
    views = json.loads(inspected.stdout)["runs"]
    assert run in views and len(views) == 2 and all(v["committed"] == 6 for v in views.values())
    for line, command in zip(printed[1:4], words[1:4], strict=True):
        done = await asyncio.to_thread(_shell, line + (" --once" if command[1] == "watch" else ""), env, elsewhere)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        assert "does not exist" not in done.stderr and "Unclosed" not in done.stderr, done.stderr
        assert "command not found" not in done.stderr
    history = await asyncio.to_thread(_shell, printed[2], env, elsewhere)
    assert "run_started" in history.stdout and "registered" in history.stdout, history.stdout
    assert "<html" in (await asyncio.to_thread(_console_answers, printed[4], env, elsewhere)).lower()

    state_topic = tomllib.loads(config.read_text())["state_topic"]
    again = ["demo", "--no-live", "--pace-s", "0", "--runs", "1", "--reports", "3", "--clean"]
    second = await asyncio.to_thread(_cli, again, env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "explore its runs" not in second.stdout
    assert not config.parent.exists(), "the next demo removed the first one's files"
    gone = await asyncio.to_thread(_cli, ["inspect", "--state-topic", state_topic], env)
    assert gone.returncode != 0 and "does not exist" in gone.stderr, "... and its topics"
    assert not (tmp_path / "home" / "last-demo.json").exists(), "--clean left nothing to clear"
