"""`ckptlog demo --no-live` end to end against the test broker, as a user (or CI) runs it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


async def test_demo_runs_end_to_end_and_its_checks_pass(kafka_bootstrap: str) -> None:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "COLUMNS": "100"}
    started = time.monotonic()
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "processor.cli", "demo", "--no-live", "--pace-s", "0.02"],
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
        [sys.executable, "-m", "processor.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


async def test_after_the_demo_its_runs_can_be_explored_and_the_next_demo_clears_them(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Issue 21 item 5: the README's explore step works with the commands the demo prints, and
    leftovers never pile up: the next demo removes them, `--clean` its own."""
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "CKPTLOG_HOME": str(tmp_path / "home")}
    env |= {"COLUMNS": "200", "NO_COLOR": "1"}
    first = await asyncio.to_thread(_cli, ["demo", "--no-live", "--pace-s", "0", "--runs", "2", "--reports", "6"], env)
    assert first.returncode == 0, first.stdout + first.stderr
    commands = [line.strip().split() for line in first.stdout.splitlines() if line.startswith("  ckptlog ")]
    assert [c[1] for c in commands] == ["inspect", "watch", "history", "rejections"], first.stdout
    config = Path(commands[0][-1])
    run = commands[1][2]
    inspected = await asyncio.to_thread(_cli, [*commands[0][1:], "--json"], env)
    assert inspected.returncode == 0, inspected.stderr
    views = json.loads(inspected.stdout)["runs"]
    assert run in views and len(views) == 2 and all(v["committed"] == 6 for v in views.values())
    for command in commands[1:]:
        args = command[1:] + (["--once"] if command[1] == "watch" else [])
        done = await asyncio.to_thread(_cli, args, env)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        assert "does not exist" not in done.stderr and "Unclosed" not in done.stderr, done.stderr
    history = await asyncio.to_thread(_cli, commands[2][1:], env)
    assert "run_started" in history.stdout and "registered" in history.stdout, history.stdout

    state_topic = tomllib.loads(config.read_text())["state_topic"]
    again = ["demo", "--no-live", "--pace-s", "0", "--runs", "1", "--reports", "3", "--clean"]
    second = await asyncio.to_thread(_cli, again, env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "explore its runs" not in second.stdout
    assert not config.parent.exists(), "the next demo removed the first one's files"
    gone = await asyncio.to_thread(_cli, ["inspect", "--state-topic", state_topic], env)
    assert gone.returncode != 0 and "does not exist" in gone.stderr, "... and its topics"
    assert not (tmp_path / "home" / "last-demo.json").exists(), "--clean left nothing to clear"
