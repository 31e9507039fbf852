"""Stopping a detached broker: its process group, SIGTERM, then SIGKILL.

Liveness and identity (`alive`, `cmdline`: a zombie counts as dead) are in
ckptlog.kafka.discovery, which clients use to find a running broker.
"""

from __future__ import annotations

import os
import signal
import time

from ckptlog.broker.errors import BrokerStartError
from ckptlog.broker.jars import Log
from ckptlog.kafka.discovery import alive


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
