"""The compiled fold in the tests (setup.py, ckptlog/compiled.py, docs/design.md "The compiled fold (mypyc)").

Which fold a test process runs is the package's choice (`ckptlog.compiled.RUNS`, in pytest's header): the
compiled one as built, its sources with `CKPTLOG_PURE=1` or when a source changed since the build. Tests marked
`from_source` inject faults by replacing functions and methods of the fold's modules; compiled code calls those
directly (not through the module or the class), so where the fold is compiled such a test runs in a subprocess
against the sources (`run_from_source`), which must pass.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ckptlog import compiled as choice

ROOT = Path(__file__).resolve().parent.parent


def compiled() -> bool:
    """Whether this process runs the compiled fold."""
    return choice.RUNS == "compiled"


def run_from_source(nodeid: str) -> None:
    """Run one test in a subprocess against the sources; AssertionError with its output unless it passed."""
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", nodeid]
    run = subprocess.run(argv, cwd=ROOT, env={**os.environ, "CKPTLOG_PURE": "1"}, capture_output=True, text=True)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0 and summary.startswith("1 passed"), f"{nodeid} from source: {run.stdout[-3000:]}"
