"""The compiled fold and its sources fold the same hostile logs to the same bytes (setup.py, ckptlog/compiled.py):
huge ints, NaN, infinities, -0.0, subnormals, bools and strings as scores, metrics of every JSON type and deeply
nested, unicode ids, duplicate and reused event ids, restarts from a snapshot, validations, finishes and reopens.
mypyc differs from CPython where an annotation is wrong (a `float` holding an int becomes a C double), so every
difference here is a bug in the one source. One subprocess each (the choice is made at `import ckptlog`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ckptlog import compiled
from tests.unit.differential.hostile import log

LOGS = 400
ROOT = Path(__file__).resolve().parents[3]


def fold_all(directory: Path, pure: bool) -> dict[str, object]:
    env = {**os.environ, "CKPTLOG_PURE": "1" if pure else ""}
    argv = [sys.executable, "-m", "tests.unit.differential.driver", str(directory)]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, check=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_compiled_and_sources_fold_hostile_logs_alike(tmp_path: Path) -> None:
    if not compiled.manifest():
        pytest.skip("the fold is not compiled here (`make compiled` says why): nothing to compare")
    for seed in range(LOGS):
        content, settings = log(seed, 40 + seed % 160)
        (tmp_path / f"{seed:03}.jsonl").write_bytes(content)
        (tmp_path / f"{seed:03}.settings").write_text(json.dumps(settings))
    built, sources = fold_all(tmp_path, pure=False), fold_all(tmp_path, pure=True)
    assert (built.pop("runs"), sources.pop("runs")) == ("compiled", "sources (CKPTLOG_PURE=1)")
    assert len(built) == LOGS
    for name in built:
        assert built[name] == sources[name], f"{name}: the compiled fold differs from its sources"
