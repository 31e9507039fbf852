"""`ckptlog demo --no-live` end to end against the test broker, as a user (or CI) runs it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
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
