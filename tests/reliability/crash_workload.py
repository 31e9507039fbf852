"""The crash matrix's training jobs: a checkpoint tree on real storage and the event stream about it.

`Tree` is the storage the jobs write (a local directory, or an S3 bucket through moto): runs
under `runs/`, and next to it what no deletion may touch — `outside/` (targets of symlinks
planted inside checkpoints, and of hostile reports) and `runs-sibling/` (a name sharing the
runs root's prefix). `Workload` makes the events chunk by chunk, writing each checkpoint's
files before its report: reports (some asking for validation, answered later as VALIDATED or
VALIDATION_FAILED), reports without a checkpoint, worker-group restarts, keep=K and keep-all
runs, bad input (dead letters), duplicates, and re-reports of checkpoints already deleted
(the path is reused: contract §9).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import fsspec

MODEL = "model.pt"
NESTED = "optim/state.json"


def envelope(event_id: str, kind: str, run_id: str, data: dict[str, Any]) -> bytes:
    body: dict[str, Any] = {
        "specversion": "1.0",
        "id": event_id,
        "source": "crash-matrix",
        "type": f"ckptlog.{kind}.v1",
    }
    body.update({"subject": run_id, "data": data})
    return json.dumps(body, separators=(",", ":")).encode()


class Tree(Protocol):
    base: str  # URL of the tree's top: runs/, outside/, runs-sibling/ below it

    def frozen(self) -> AbstractContextManager[None]:
        """While nothing writes: `gone` and `intact` may answer from one listing."""
        ...

    def write_checkpoints(self, urls: list[str]) -> None: ...

    def gone(self, url: str) -> bool: ...

    def intact(self, url: str) -> bool: ...

    def guarded(self) -> dict[str, str]: ...


def _content(url: str) -> bytes:
    return hashlib.sha256(url.encode()).hexdigest().encode()


class LocalTree:
    """A real directory tree; some checkpoints hold symlinks to a file and a directory outside."""

    def __init__(self, top: Path) -> None:
        self.top, self.base = top, top.as_uri()
        for area in ("runs", "outside/dir", "runs-sibling"):
            (top / area).mkdir(parents=True, exist_ok=True)
        for area in ("outside", "outside/dir", "runs-sibling"):
            (top / area / "keep.bin").write_bytes(b"not yours to delete")

    def _path(self, url: str) -> Path:
        return Path(url.removeprefix("file://"))

    def frozen(self) -> AbstractContextManager[None]:
        return nullcontext()

    def write_checkpoints(self, urls: list[str]) -> None:
        for url in urls:
            path = self._path(url)
            (path / "optim").mkdir(parents=True, exist_ok=True)
            (path / MODEL).write_bytes(_content(url))
            (path / NESTED).write_bytes(b"{}")
            if int(hashlib.sha256(url.encode()).hexdigest(), 16) % 4 == 0:  # a quarter link outside
                (path / "shared.bin").symlink_to(self.top / "outside" / "keep.bin")
                (path / "data").symlink_to(self.top / "outside" / "dir", target_is_directory=True)

    def gone(self, url: str) -> bool:
        return not os.path.lexists(self._path(url))

    def intact(self, url: str) -> bool:
        path = self._path(url)
        try:
            return (path / MODEL).read_bytes() == _content(url) and (path / NESTED).is_file()
        except OSError:
            return False

    def guarded(self) -> dict[str, str]:
        """Every file and link outside the runs root, with a digest of what it holds or points at."""
        found: dict[str, str] = {}
        for area in ("outside", "runs-sibling"):
            for directory, dirs, files in os.walk(self.top / area):
                for name in [*dirs, *files]:
                    path = Path(directory) / name
                    rel = str(path.relative_to(self.top))
                    if path.is_symlink():
                        found[rel] = f"link:{os.readlink(path)}"
                    elif path.is_file():
                        found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        return found


class RemoteTree:
    """The same layout in an fsspec bucket (S3 through moto in the tests); no symlinks there."""

    def __init__(self, base: str, options: dict[str, Any]) -> None:
        self.base = base.rstrip("/")
        self.fs, _ = fsspec.core.url_to_fs(self.base, **options)
        self._listing: dict[str, list[str]] | None = None  # directory -> files below it, while frozen
        self.fs.pipe({self._key(f"{self.base}/{area}/keep.bin"): b"not yours" for area in ("outside", "runs-sibling")})

    def _key(self, url: str) -> str:
        return str(self.fs._strip_protocol(url))

    def write_checkpoints(self, urls: list[str]) -> None:
        """All of a chunk's objects in one call: s3fs puts them concurrently."""
        files = {}
        for url in urls:
            key = self._key(url)
            files.update({f"{key}/{MODEL}": _content(url), f"{key}/{NESTED}": b"{}"})
        if files:
            self.fs.pipe(files)

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """One listing of runs/ answers every question (a request per checkpoint is slow on moto)."""
        self.fs.invalidate_cache()
        listing: dict[str, list[str]] = {}
        for found in self.fs.find(self._key(f"{self.base}/runs")):
            parts = str(found).split("/")
            for depth in range(1, len(parts)):
                listing.setdefault("/".join(parts[:depth]), []).append(str(found))
        self._listing = listing
        try:
            yield
        finally:
            self._listing = None

    def _files(self, url: str) -> list[str]:
        key = self._key(url)
        if self._listing is not None:
            return sorted(self._listing.get(key, []))
        self.fs.invalidate_cache()
        try:
            return sorted(str(p) for p in self.fs.find(key))
        except FileNotFoundError:
            return []

    def gone(self, url: str) -> bool:
        return not self._files(url)

    def intact(self, url: str) -> bool:
        key = self._key(url)
        if self._files(url) != sorted([f"{key}/{MODEL}", f"{key}/{NESTED}"]):
            return False
        return bool(self.fs.cat_file(f"{key}/{MODEL}") == _content(url))

    def guarded(self) -> dict[str, str]:
        self.fs.invalidate_cache()
        found: dict[str, str] = {}
        for area in ("outside", "runs-sibling"):
            for key in self.fs.find(self._key(f"{self.base}/{area}")):
                found[str(key)] = hashlib.sha256(self.fs.cat_file(key)).hexdigest()
        return found


@dataclass
class Run:
    run_id: str
    root: str
    keep: int | None
    paths: list[str] = field(default_factory=list)  # every checkpoint path reported, in order
    waiting: list[tuple[int, str]] = field(default_factory=list)  # (answer at step, path) of validations


KEEPS: list[int | None] = [2, 1, None, 3, 2, 4]
KEEP_ALL_CAP = 300
"""Checkpoints a keep-all run gets; later reports of it carry none (its view, re-published with
every batch that changes it, would otherwise grow without bound over a long run)."""


class Workload:
    """Events chunk by chunk; every checkpoint's files are written before its report is returned."""

    def __init__(self, tree: Tree, seed: int, runs: int = 6, reuse: float = 0.05) -> None:
        self.tree, self.rng, self.reuse = tree, random.Random(seed), reuse
        self.runs = [Run(f"run-{i}", f"{tree.base}/runs/run-{i}", KEEPS[i % len(KEEPS)]) for i in range(runs)]
        self.step = 0
        self.written: set[str] = set()  # every path whose files a job wrote
        self._writes: list[str] = []  # the current chunk's checkpoints, written before it is returned
        self.recent: list[bytes] = []
        self.started = False

    def chunk(self, size: int) -> list[bytes]:
        """The next `size` (or a few more) lines; their checkpoints' files are written on return."""
        lines: list[bytes] = [] if self.started else [self._run_started(run) for run in self.runs]
        self.started, self._writes = True, []
        while len(lines) < size:
            lines.extend(self._next())
        self.tree.write_checkpoints(self._writes)
        self.recent = (self.recent + lines)[-30:]
        return lines

    def _run_started(self, run: Run) -> bytes:
        config = {"num_to_keep": run.keep, "checkpoint_score_attribute": "acc"}
        return envelope(
            f"start-{run.run_id}", "run_started", run.run_id, {"storage_path": run.root, "checkpoint_config": config}
        )

    def _next(self) -> list[bytes]:
        self.step += 1
        rng, run = self.rng, self.rng.choice(self.runs)
        lines = self._answers(run)
        roll = rng.random()
        if roll < 0.03:
            lines.append(self._bad(run))
        elif roll < 0.05 and self.recent:
            lines.append(rng.choice(self.recent))  # a producer's retry: same id, a no-op (or the same dead letter)
        elif roll < 0.06:
            lines.append(envelope(f"restart-{self.step}", "worker_group_restart", run.run_id, {"num_workers": 2}))
        elif roll < 0.09:
            lines.append(self._report(run, None, False))
        elif roll < 0.09 + self.reuse and (again := self._deleted(run)) is not None:
            lines.append(self._report(run, again, False))
        elif run.keep is None and len(run.paths) >= KEEP_ALL_CAP:
            lines.append(self._report(run, None, False))
        else:
            lines.append(self._report(run, f"{run.root}/ckpt-{self.step:07d}", rng.random() < 0.25))
        return lines

    def _report(self, run: Run, path: str | None, validate: bool) -> bytes:
        metrics = {"acc": round(self.rng.random(), 4), "step": self.step}
        if path is not None:
            self._writes.append(path)
            self.written.add(path)
            run.paths.append(path)
        if validate and path is not None:
            run.waiting.append((self.step + self.rng.randint(2, 40), path))
        data = {"metrics": metrics, "checkpoint": None if path is None else {"path": path}, "validation": validate}
        return envelope(f"rep-{self.step}", "report", run.run_id, data)

    def _answers(self, run: Run) -> list[bytes]:
        due = [w for w in run.waiting if w[0] <= self.step]
        run.waiting = [w for w in run.waiting if w[0] > self.step]
        lines = []
        for _, path in due:
            status = "VALIDATED" if self.rng.random() < 0.75 else "VALIDATION_FAILED"
            data = {"checkpoint_path": path, "status": status, "metrics": {"acc": round(self.rng.random(), 4)}}
            lines.append(envelope(f"val-{self.step}-{path}", "validation_result", run.run_id, data))
        return lines

    def _deleted(self, run: Run) -> str | None:
        """A checkpoint of this run the processor just deleted: its path is reported again. Recent ones
        first: a reuse right after the deletion, before the processor committed its completion, is
        what a restore must not get wrong (contract §9)."""
        recent = list(dict.fromkeys(reversed(run.paths[-14:-2])))
        for path in recent[:3] + self.rng.sample(recent[3:], min(2, len(recent[3:]))):
            if path not in self._writes and self.tree.gone(path):
                return path
        return None

    def _bad(self, run: Run) -> bytes:
        """Input that must be dead-lettered and change nothing (contract §8, §9)."""
        kind, step = self.rng.randrange(6), self.step
        if kind == 0:
            return b'{"specversion": "1.0", "id": "broken-%d", ' % step
        if kind == 1:
            return envelope(f"bad-{step}", "reboot", run.run_id, {})
        if kind == 2:
            config = {"num_to_keep": 0}
            return envelope(
                f"bad-{step}", "run_started", f"bad-run-{step}", {"storage_path": run.root, "checkpoint_config": config}
            )
        if kind == 3:  # a checkpoint outside the run's root, which exists: never deleted
            return self._raw_report(run, f"{self.tree.base}/outside/dir", step)
        if kind == 4:
            return self._raw_report(run, f"{run.root}/../../outside/dir", step)
        return self._raw_report(run, f"{self.tree.base}/runs-sibling", step)

    def _raw_report(self, run: Run, path: str, step: int) -> bytes:
        data = {"metrics": {"acc": 1.0}, "checkpoint": {"path": path}, "validation": False}
        return envelope(f"bad-{step}", "report", run.run_id, data)
