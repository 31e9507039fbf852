"""`ckptlog finish --idle-for DURATION`: finish every run that has been idle that long (issue 24).

Idle means the processor has not published the run's VIEW for that long: it republishes it after
every change, so the broker timestamp of the run's newest state record is its last activity. The
fold stays clock-free: this is the shell deciding, with the wall clock, to send the same
`run_started`-free `run_finished` an operator would (contract §3), one per run.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from ckptlog.errors import ConfigError
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.processor.service.views import read_state_topic

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_duration(text: str) -> float:
    """`90s`, `30m`, `12h`, `7d`, `2w` or combinations (`1d12h`) -> seconds; ConfigError otherwise."""
    spelled = text.strip().lower()
    parts = _DURATION.findall(spelled)
    if not parts or "".join(n + u for n, u in parts) != spelled:
        raise ConfigError(f"--idle-for {text!r}: give a duration such as 90s, 30m, 12h, 7d or 1d12h")
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise ConfigError(f"--idle-for {text!r}: the duration must be positive")
    return seconds


@dataclass(frozen=True, slots=True)
class IdleRun:
    run_id: str
    idle_s: float
    epoch: int = 0  # the VIEW's `reopened`: what the run's finish is named by (contract §3 "Reopened runs")


async def idle_runs(
    conn: KafkaConnection, state_topic: str, idle_for_s: float, prefix: str | None = None, now: float | None = None
) -> list[IdleRun]:
    """The unfinished runs whose VIEW was last written more than `idle_for_s` ago, most idle first."""
    state = await read_state_topic(conn, state_topic)
    now_ms = (time.time() if now is None else now) * 1000
    found = []
    for run_id, view in state.views.items():
        written = state.written_ms.get(run_id)
        if view.get("finished") or written is None or (prefix is not None and not run_id.startswith(prefix)):
            continue
        idle_s = (now_ms - written) / 1000
        if idle_s > idle_for_s:
            found.append(IdleRun(run_id, idle_s, view.get("reopened") or 0))
    return sorted(found, key=lambda r: (-r.idle_s, r.run_id))


def idle_text(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f}d"
    return f"{seconds / 3600:.1f}h" if seconds >= 3600 else f"{seconds:.0f}s"
