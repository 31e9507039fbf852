"""Which fold this process runs: the compiled one (setup.py, docs/design.md "The compiled fold (mypyc)") or its
sources, decided once, by `ckptlog/__init__.py`, before anything imports a compiled module.

setup.py records each compiled module's sha256 in `ckptlog/_compiled.json`. The sources run instead when
CKPTLOG_PURE=1, or when a source changed since the build: an extension left beside an edited source would run
the old code, so one line on stderr names the changed sources and says to rebuild. Compiled modules call one
another directly, not through their modules, so it is every one of them from source or none.

Imports nothing of ckptlog (it runs first) and nothing dear: every `import ckptlog` pays for it (~15 file reads
and hashes where the fold is compiled, a failed `stat` where it is not).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "ckptlog" / "_compiled.json"

RUNS = "none"
"""What this process runs: "compiled", "sources (why)", or "none" (nothing was compiled: the sources)."""


def manifest() -> dict[str, str]:
    """The compiled modules' sources (paths from the repository's root) and their sha256 when built; {} if none."""
    try:
        digests: dict[str, str] = json.loads(MANIFEST.read_bytes())
    except FileNotFoundError:
        return {}
    return digests


def stale(digests: dict[str, str]) -> list[str]:
    """The compiled modules whose source changed (or went) since the build."""
    changed = []
    for path, digest in digests.items():
        try:
            data = (ROOT / path).read_bytes()
        except OSError:
            data = b""
        if hashlib.sha256(data).hexdigest() != digest:
            changed.append(path)
    return changed


class _SourceFirst:
    """A meta path finder: the compiled modules from their .py files."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if name not in self.names:
            return None
        return importlib.util.spec_from_file_location(name, ROOT / (name.replace(".", "/") + ".py"))


def choose() -> str:
    """Decide, once per process, before a compiled module is imported; returns (and sets) `RUNS`."""
    global RUNS
    digests = manifest()
    if not digests:
        return RUNS
    changed = [] if os.environ.get("CKPTLOG_PURE") == "1" else stale(digests)
    if os.environ.get("CKPTLOG_PURE") != "1" and not changed:
        RUNS = "compiled"
        return RUNS
    names = {path.removesuffix(".py").replace("/", ".") for path in digests}
    if names & set(sys.modules):  # too late to choose: what was imported stays (a second `choose`)
        return RUNS
    sys.meta_path.insert(0, _SourceFirst(names))
    if changed:
        RUNS = f"sources ({', '.join(changed)} changed since compiled)"
        print(
            f"ckptlog: {', '.join(changed)} changed since the fold was compiled: running the sources;"
            " `make compiled` rebuilds it",
            file=sys.stderr,
        )
    else:
        RUNS = "sources (CKPTLOG_PURE=1)"
    return RUNS
