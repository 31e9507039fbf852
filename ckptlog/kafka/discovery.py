"""Where Kafka is, for every client and command: found, never started (docs/clients.md).

`find_bootstrap`: the address given, else $KAFKA_BOOTSTRAP_SERVERS / $CKPTLOG_BOOTSTRAP_SERVERS,
else the default local broker in ${CKPTLOG_HOME:-~/.ckptlog}/broker *if it already runs and
answers*, else None. Reading that directory creates nothing: its broker.json (pid + bootstrap) is
written by the launcher (ckptlog.broker), which alone starts brokers (`ensure_bootstrap`).

The broker is re-parented to PID 1 after launch; on some machines PID 1 never reaps children,
so a dead broker can linger as a zombie that `kill -0` still sees. Liveness therefore also
reads the process state from /proc. No aiokafka here: the launcher imports this module too.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ckptlog.kafka import probe

ENV_BOOTSTRAP = ("KAFKA_BOOTSTRAP_SERVERS", "CKPTLOG_BOOTSTRAP_SERVERS")
STATE_FILE = "broker.json"
PROPS_FILE = "server.properties"


def ckptlog_home() -> Path:
    """${CKPTLOG_HOME:-~/.ckptlog}: the local broker, the default snapshots, the last demo's record."""
    home = os.environ.get("CKPTLOG_HOME")
    return Path(home).expanduser() if home else Path.home() / ".ckptlog"


def default_dir() -> Path:
    """${CKPTLOG_HOME:-~/.ckptlog}/broker: the default broker clients find and `ensure_bootstrap` starts."""
    return ckptlog_home() / "broker"


@dataclass(frozen=True)
class BrokerState:
    """The content of broker.json; kept after stop (pid None) so ports stay stable."""

    pid: int | None
    bootstrap: str
    port: int
    controller_port: int
    kafka_version: str
    cluster_id: str
    log_file: str


def read_state(state_file: Path) -> BrokerState | None:
    """broker.json, or None when absent or unreadable."""
    try:
        raw = json.loads(state_file.read_text())
        return BrokerState(**raw)
    except (OSError, ValueError, TypeError):
        return None


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


def live_pid(state: BrokerState | None, props_file: Path) -> int | None:
    """The pid from broker.json if it is alive and really the broker of `props_file`'s directory."""
    if state is None or state.pid is None or not alive(state.pid):
        return None
    cmd = cmdline(state.pid)
    if cmd is not None and str(props_file) not in cmd:
        return None  # pid was reused by an unrelated process
    return state.pid


def configured_bootstrap(configured: str | None) -> str | None:
    """`configured`, else $KAFKA_BOOTSTRAP_SERVERS / $CKPTLOG_BOOTSTRAP_SERVERS, else None."""
    if configured:
        return configured
    for name in ENV_BOOTSTRAP:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def running_bootstrap(dir: Path | None = None) -> str | None:
    """The address of the default local broker if it runs and answers, else None.

    Reads broker.json and probes the broker; never starts one and creates nothing."""
    where = Path(dir if dir is not None else default_dir()).expanduser().resolve()
    state = read_state(where / STATE_FILE)
    if state is None or live_pid(state, where / PROPS_FILE) is None:
        return None
    return state.bootstrap if probe.answers(state.bootstrap) else None


def find_bootstrap(configured: str | None) -> str | None:
    """Where Kafka is, never starting it: `configured_bootstrap`, else the running default
    local broker, else None. What clients use."""
    return configured_bootstrap(configured) or running_bootstrap()
