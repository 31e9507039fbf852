"""Crash points: the registry matches the sources, and CKPTLOG_CRASH_AT kills at the n-th hit."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

from ckptlog.processor.failpoints import ENV, POINTS

REPO = Path(__file__).resolve().parents[2]


def placed() -> list[str]:
    """Every `crash_point("...")` literal in ckptlog/processor/."""
    names = []
    for path in (REPO / "ckptlog" / "processor").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "crash_point":
                assert isinstance(node.args[0], ast.Constant), f"{path}: crash_point takes a literal name"
                names.append(node.args[0].value)
    return names


def test_every_point_is_registered_once_and_placed_once() -> None:
    names = placed()
    assert sorted(names) == sorted(POINTS), "ckptlog/processor/failpoints.py POINTS must list exactly the placed points"
    assert len(set(names)) == len(names), "each crash point is placed once"
    assert all(name.count(".") == 1 for name in names), "names are <area>.<moment>"
    assert len(POINTS) >= 20


def _run(spec: str) -> subprocess.CompletedProcess[str]:
    code = "from ckptlog.processor.failpoints import crash_point as c\n"
    code += "for i in range(3):\n    c('a.b')\n    print(i, flush=1)"
    return subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, ENV: spec}, capture_output=True, text=True, timeout=30
    )


def test_crash_at_kills_with_sigkill_the_nth_time() -> None:
    result = _run("a.b@2")
    assert result.returncode == -signal.SIGKILL
    assert result.stdout.split() == ["0"]


def test_other_points_and_no_count_mean_once() -> None:
    assert _run("other.point").returncode == 0
    assert _run("a.b").returncode == -signal.SIGKILL
