"""The whole-system test's directory tree: what the streams' jobs write, and what must stay.

    base/runs/                 --storage-root; every run root below it (ROOT.keep in each)
    base/runs/escape -> base/outside/escaped    a link below --storage-root leading outside it
    base/outside/, base/runs-sibling/           what no deletion may touch

`snapshot()` records every file and link under `base` (links are not followed: a file reached
through `escape` is recorded where it really is, under `outside/`), so "nothing changed but the
evictions" is one comparison of two snapshots.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from tests.reliability.system_stream import ROOT_FILE

MODEL = "model.pt"
NESTED = "optim/state.json"


def content(path: str) -> bytes:
    return hashlib.sha256(path.encode()).hexdigest().encode()


class SystemTree:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.storage = base / "runs"
        for area in ("runs", "outside/dir", "outside/escaped", "runs-sibling"):
            (base / area).mkdir(parents=True, exist_ok=True)
        for area in ("outside", "outside/dir", "runs-sibling", "runs"):
            (base / area / "keep.bin").write_bytes(b"not yours to delete")
        if not (self.storage / "escape").is_symlink():
            (self.storage / "escape").symlink_to(base / "outside" / "escaped", target_is_directory=True)
        self.written: dict[str, str] = {}  # checkpoint dir -> the run whose job wrote it (last)

    def write(self, writes: Iterable[tuple[str, str]], roots: Iterable[str]) -> None:
        for root in roots:
            Path(root).mkdir(parents=True, exist_ok=True)
            (Path(root) / ROOT_FILE).write_bytes(content(root))
        for run_id, path in writes:
            if path in self.written and os.path.isdir(path):
                continue  # another run's job wrote it first and it is there: the writer stays the first
            (Path(path) / "optim").mkdir(parents=True, exist_ok=True)
            (Path(path) / MODEL).write_bytes(content(path))
            (Path(path) / NESTED).write_bytes(b"{}")
            self.written[path] = run_id

    def snapshot(self) -> dict[str, str]:
        """Every file and link below `base`: absolute path -> digest, or `link:target`."""
        found: dict[str, str] = {}
        for directory, dirs, files in os.walk(self.base):
            for name in [*dirs, *files]:
                path = os.path.join(directory, name)
                if os.path.islink(path):
                    found[path] = f"link:{os.readlink(path)}"
                elif name in files:
                    try:
                        found[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                    except OSError as exc:
                        found[path] = f"unreadable:{exc.__class__.__name__}"
        return found

    def intact(self, path: str) -> bool:
        """A checkpoint its job wrote holds its files; any other (a directory a run reported
        that another run's job wrote) still exists (its files are compared by `snapshot`)."""
        if path not in self.written:
            return os.path.isdir(path)
        try:
            return (Path(path) / MODEL).read_bytes() == content(path) and (Path(path) / NESTED).is_file()
        except OSError:
            return False

    @staticmethod
    def gone(path: str) -> bool:
        return not os.path.lexists(path)


def under(path: str, prefixes: set[str]) -> bool:
    """Whether `path` is one of `prefixes` or lies below one."""
    parts = path.split("/")
    return any("/".join(parts[:n]) in prefixes for n in range(2, len(parts) + 1))


def changes(before: dict[str, str], after: dict[str, str], evicted: set[str], storage: str) -> list[str]:
    """What changed between two snapshots but the files below `evicted` (checkpoints their own run
    wrote and evicted: they may go) and new files below --storage-root (e.g. claim files)."""
    problems = []
    for path, digest in sorted(before.items()):
        now = after.get(path)
        if now != digest and not (now is None and under(path, evicted)):
            problems.append(f"{path}: {'deleted' if now is None else 'changed'}")
    for path in sorted(after.keys() - before.keys()):
        if not path.startswith(storage + "/"):
            problems.append(f"{path}: created outside --storage-root")
    return problems
