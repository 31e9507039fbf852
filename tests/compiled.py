"""The compiled fold in the tests (setup.py, docs/design.md "The compiled fold (mypyc)").

- A stale build is refused: a compiled module whose source changed since it was built would run the old code.
- `CKPTLOG_PURE=1` makes this process import the sources of the compiled modules (the pure Python fold).
- Tests marked `from_source` inject faults by replacing functions and methods of the fold's modules; compiled code
  calls those directly (not through the module or the class), so where the fold is compiled such a test runs in a
  subprocess against the sources (`run_from_source`), which must pass.

Imports nothing of ckptlog: `use_source` must run before the first import of a compiled module.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "ckptlog" / "_compiled.json"
PURE = os.environ.get("CKPTLOG_PURE") == "1"


def manifest() -> dict[str, str]:
    """The compiled modules' sources (repository paths) and their sha256 when built; {} when nothing is compiled."""
    if not MANIFEST.exists():
        return {}
    digests: dict[str, str] = json.loads(MANIFEST.read_text())
    return digests


def module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def stale() -> list[str]:
    """The compiled modules whose source changed since the build."""
    return [
        path for path, digest in manifest().items() if hashlib.sha256((ROOT / path).read_bytes()).hexdigest() != digest
    ]


def compiled() -> bool:
    """Whether this process runs the compiled fold."""
    return bool(manifest()) and not PURE


class _SourceFirst:
    """A meta path finder: the compiled modules from their .py files."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if name not in self.names:
            return None
        source = ROOT / (name.replace(".", "/") + ".py")
        return importlib.util.spec_from_file_location(name, source)


def use_source() -> None:
    """With CKPTLOG_PURE=1: import the compiled modules' sources in this process (before any is imported)."""
    names = {module_name(path) for path in manifest()}
    if PURE and names:
        assert not names & set(sys.modules), "use_source after a compiled module was imported"
        sys.meta_path.insert(0, _SourceFirst(names))


def run_from_source(nodeid: str) -> None:
    """Run one test in a subprocess against the sources; AssertionError with its output unless it passed."""
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", nodeid]
    run = subprocess.run(argv, cwd=ROOT, env={**os.environ, "CKPTLOG_PURE": "1"}, capture_output=True, text=True)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0 and summary.startswith("1 passed"), f"{nodeid} from source: {run.stdout[-3000:]}"
