"""Process helpers for a detached broker: liveness, identity and termination.

The broker is re-parented to PID 1 after launch; on some machines PID 1 never
reaps children, so a dead broker can linger as a zombie that `kill -0` still
sees. Liveness therefore also reads the process state from /proc.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from processor.broker.errors import BrokerStartError
from processor.broker.jars import Log


def _proc_state(pid: int) -> str | None:
    """The one-letter state from /proc (None where /proc is absent or pid gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[0] if fields else None


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _proc_state(pid) not in ("Z", "X")


def cmdline(pid: int) -> str | None:
    """The command line of `pid`, or None where /proc cannot tell."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return None


def _signal(pid: int, sig: signal.Signals) -> None:
    """Signal the broker's whole process group (its own session), never ours."""
    try:
        pgid = os.getpgid(pid)
        if pgid != os.getpgrp():
            os.killpg(pgid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def wait_dead(pid: int, timeout: float) -> bool:
    """Wait up to `timeout` seconds for `pid` to exit; True if it did."""
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def terminate(pid: int, timeout: float, log: Log) -> None:
    """SIGTERM (Kafka shuts down cleanly), then SIGKILL after `timeout` seconds."""
    _signal(pid, signal.SIGTERM)
    if wait_dead(pid, timeout):
        return
    log(f"broker pid {pid} ignored SIGTERM for {timeout:.0f}s; killing it")
    _signal(pid, signal.SIGKILL)
    if not wait_dead(pid, 10.0):
        raise BrokerStartError(f"broker pid {pid} survived SIGKILL; stop it by hand")
