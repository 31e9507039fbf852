"""bench.recheck runs the deleter's event-loop stages over the real plumbing: every path the dense
fold evicts is submitted (check 1) and, at job start, cleared by checks 2 and 3 (still owed)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench.recheck import run


def test_every_evicted_path_is_submitted_and_cleared_as_still_owed(tmp_path: Path) -> None:
    outer = (tmp_path / "runs").as_uri()
    submitted, cleared, dropped = asyncio.run(run(400, "recheck", outer, outer))
    assert submitted == cleared > 250 and dropped["dropped"] == 0
    assert asyncio.run(run(400, "submit", outer, outer))[:2] == (submitted, 0)
