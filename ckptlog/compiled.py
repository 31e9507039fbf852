"""Which fold this process runs: the compiled one (setup.py, docs/design.md "The compiled fold (mypyc)") or its
sources, decided once, by `ckptlog/__init__.py`, before anything imports a compiled module.

setup.py records each compiled module's sha256 in `ckptlog/_compiled.json`. The sources run instead when
CKPTLOG_PURE=1, or when a source changed since the build: an extension left beside an edited source would run
the old code, so one line on stderr names the changed sources and says to rebuild. Compiled modules call one
another directly, not through their modules, so it is every one of them from source or none.

A manifest that cannot be trusted (not JSON, not a table of the package's sources: a path like ../../etc/passwd is
never opened) or extensions without one (an install that could not compile removed it, e.g. `make frameworks`
before setup.py kept a current build) run every extension from source, saying so: no unchecked build ever runs.

Imports nothing of ckptlog (it runs first) and nothing dear: every `import ckptlog` pays for it (~15 file reads
and hashes where the fold is compiled, a failed `stat` and one directory listing where it is not).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "ckptlog" / "_compiled.json"
PACKAGE = "ckptlog/processor/core"
"""Where setup.py's compiled modules are (tests/unit/test_compiled.py checks every one of them is)."""

RUNS = "none"
"""What this process runs: "compiled", "sources (why)", or "none" (nothing was compiled: the sources)."""


def manifest() -> dict[str, str]:
    """The compiled modules' sources (paths from the repository's root) and their sha256 when built; {} if none.
    ValueError when it cannot be trusted: not JSON, not such a table, or naming a file outside the package."""
    try:
        data = MANIFEST.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        digests = json.loads(data)
    except ValueError as exc:  # a JSONDecodeError or bytes that are not UTF-8
        raise ValueError(f"{MANIFEST.name} is not JSON ({exc})") from None
    return checked(digests)


def checked(digests: object) -> dict[str, str]:
    """`digests` if it is a table of module sources in the package to sha256s, else ValueError (nothing is read)."""
    if not isinstance(digests, dict):
        raise ValueError(f"{MANIFEST.name} is not a table of sources")
    for path, digest in digests.items():
        parts = path.split("/") if isinstance(path, str) else []
        if not (parts[0:1] == ["ckptlog"] and path.endswith(".py") and all(p not in ("", ".", "..") for p in parts)):
            raise ValueError(f"{MANIFEST.name} names {path!r}, not a module of the package")
        if not isinstance(digest, str) or len(digest) != 64:
            raise ValueError(f"{MANIFEST.name} has no sha256 for {path}")
    return digests


def extensions() -> set[str]:
    """The modules built as extensions beside their sources in the compiled package (whatever the manifest says)."""
    try:
        files = os.listdir(ROOT / PACKAGE)
    except OSError:
        return set()
    prefix = PACKAGE.replace("/", ".") + "."
    return {prefix + f.split(".", 1)[0] for f in files if f.endswith(tuple(EXTENSION_SUFFIXES))}


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
    pure = os.environ.get("CKPTLOG_PURE") == "1"
    try:
        digests = manifest()
    except ValueError as exc:  # no digest can be checked: every extension runs from source, whatever was asked
        return _from_source(extensions(), str(exc), f"{exc}:")
    if not digests:
        orphans = extensions()  # a listing only where nothing was compiled (a failed `stat` above)
        if not orphans:
            return RUNS
        if pure:
            return _from_source(orphans, "CKPTLOG_PURE=1")
        why = f"compiled extensions without {MANIFEST.name}"
        return _from_source(orphans, why, f"{why} (a build that went wrong):")
    changed = [] if pure else stale(digests)
    if not pure and not changed:
        RUNS = "compiled"
        return RUNS
    names = {path.removesuffix(".py").replace("/", ".") for path in digests}
    if not changed:
        return _from_source(names, "CKPTLOG_PURE=1")
    what = ", ".join(changed)
    return _from_source(names, f"{what} changed since compiled", f"{what} changed since the fold was compiled:")


def _from_source(names: set[str], why: str, said: str | None = None) -> str:
    """Run the modules `names` from their sources (`RUNS`: "sources (why)"); `said` on stderr unless None."""
    global RUNS
    if names & set(sys.modules):  # too late to choose: what was imported stays (a second `choose`)
        return RUNS
    sys.meta_path.insert(0, _SourceFirst(names))
    RUNS = f"sources ({why})"
    if said is not None:
        print(f"ckptlog: {said} running the sources; `make compiled` rebuilds it", file=sys.stderr)
    return RUNS
