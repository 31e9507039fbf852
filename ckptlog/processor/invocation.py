"""How the user runs this ckptlog, so that every command a hint prints runs as printed (issue 38 item 3).

`make demo` runs `.venv/bin/ckptlog demo` and never puts `.venv/bin` on the PATH, so a hint saying
bare `ckptlog inspect …` fails with `ckptlog: command not found`. A hint spells the command as
`ckptlog_command()` says: `ckptlog` when that name on the PATH is this very script, else the
script's absolute path (it runs from any directory and any new terminal). Stdlib only: the local
broker's launcher uses it too.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

NAME = "ckptlog"


def running_script() -> Path | None:
    """The `ckptlog` console script this process runs (absolute), or the one installed next to this
    interpreter (`python -m ckptlog.cli` in a virtualenv); None when there is neither."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == NAME and argv0.is_file():
        return argv0.absolute()
    beside = Path(sys.executable).parent / NAME
    return beside.absolute() if beside.is_file() else None


def ckptlog_command() -> str:
    """The program name hints print: `ckptlog` when the PATH finds this ckptlog, else its script's
    path (shell-quoted), else `PYTHON -m ckptlog.cli`."""
    script = running_script()
    if script is None:
        return shlex.join([sys.executable, "-m", "ckptlog.cli"])
    found = shutil.which(NAME)
    try:
        if found is not None and os.path.samefile(found, script):
            return NAME
    except OSError:
        pass
    return shlex.quote(str(script))


def activation_hint() -> str | None:
    """`source /…/.venv/bin/activate`, when this ckptlog is not on the PATH and lives in a virtualenv
    that has an activation script (after it, bare `ckptlog` works); else None."""
    script = running_script()
    if script is None or ckptlog_command() == NAME:
        return None
    activate = script.parent / "activate"
    return f"source {shlex.quote(str(activate))}" if activate.is_file() else None
