"""Named crash points for the reliability suite's crash matrix (tests/reliability).

`crash_point("commit.after")` does nothing unless the environment variable
`CKPTLOG_CRASH_AT` names that point: `CKPTLOG_CRASH_AT=commit.after@3` kills this process with
SIGKILL — no cleanup, no flush, exactly what `kill -9` does — the third time the point is
reached. The variable is read once, at import; a process without it pays one global read per
point. Points are placed where a crash would be most harmful (between a commit and its
deletions, in the middle of a snapshot write, during a restore), so a test can aim at each of
them instead of hoping a random kill lands there.
"""

from __future__ import annotations

import os
import signal

ENV = "CKPTLOG_CRASH_AT"


def _parse(spec: str) -> tuple[str, int] | None:
    name, _, count = spec.strip().partition("@")
    if not name:
        return None
    return name, int(count) if count.isdigit() and int(count) > 0 else 1


_TARGET = _parse(os.environ.get(ENV, ""))
_seen = 0


def crash_point(name: str) -> None:
    """Die here with SIGKILL when `CKPTLOG_CRASH_AT` names this point (see the module docstring)."""
    global _seen
    if _TARGET is None or _TARGET[0] != name:
        return
    _seen += 1
    if _seen >= _TARGET[1]:
        os.kill(os.getpid(), signal.SIGKILL)
