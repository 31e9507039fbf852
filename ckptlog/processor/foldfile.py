"""Folding a file of CloudEvents JSON lines: what `ckptlog fold` runs.

`fold_lines` drives the one fold (ckptlog/processor/core) over lines; kept apart from the CLI so the
benchmark and tests drive exactly the same code. A shard `(k, shards)` folds only the runs
that `shards` assigns to `k` (see `ckptlog/processor/sharding.py`): runs are independent, so n shards
folded in n processes give the same views as one fold.

The fold's state is acyclic, so it is moved out of the cyclic GC's sight (`gc.freeze`) as it
grows; refcounting still frees it. Otherwise every full collection re-scans millions of
kept records (it doubled the time to build the keep=None document).
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckptlog.events.codec import decode_event
from ckptlog.events.rejections import Rejection
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.outputs import Deletion
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.core.view import run_view
from ckptlog.processor.sharding import AMBIGUOUS, Shards, plan
from ckptlog.processor.whatif import Override

GC_FREEZE_MASK = 65_535  # freeze every 64k lines
# a young collection per 100k allocations, not per 700 (the default; a report allocates ~20 objects):
# over 1M reports at keep=5, 2,912 collections took 0.94 s of 16.5 s CPU; with this, 16 took 0.51 s
YOUNG_GC_THRESHOLD = 100_000
PARALLEL_FROM_BYTES = 16 * 1024 * 1024
SAMPLE_BYTES = 8 * 1024 * 1024  # the head of the file whose runs `plan()` balances over workers


@dataclass(slots=True)
class FoldResult:
    fold: Fold
    rejected: list[dict[str, Any]] = field(default_factory=list)
    deletions: list[Deletion] = field(default_factory=list)  # every eviction, in order
    applied: int = 0
    duplicates: int = 0
    first_line: dict[str, int] = field(default_factory=dict)  # run id -> line that created it

    @property
    def evicted(self) -> dict[str, list[str]]:
        """Run id -> evicted paths in eviction order (grouped once here, not per eviction)."""
        evicted: dict[str, list[str]] = {}
        for run_id, path, _, _ in self.deletions:
            paths = evicted.get(run_id)
            if paths is None:
                paths = evicted[run_id] = []
            paths.append(path)
        return evicted

    def document(self) -> dict[str, Any]:
        """`{"runs": {RUN_ID: VIEW + evicted}, "rejected": [...]}` — the public contract."""
        runs, evicted = {}, self.evicted
        for run_id, run in self.fold.runs.items():
            view = run_view(run)
            view["evicted"] = evicted.get(run_id, [])
            runs[run_id] = view
        return {"runs": runs, "rejected": self.rejected}


def fold_lines(
    lines: Iterable[bytes],
    settings: FoldSettings | None = None,
    *,
    shard: tuple[int, Shards] | None = None,
    progress: Callable[[int], None] | None = None,
    override: Override | None = None,
) -> FoldResult:
    """Fold one event per line; blank lines are skipped, every other line is applied or rejected.
    `override`: every run_started line is rewritten first (ckptlog/processor/whatif.py, `fold --override-*`).
    The decode limits are the settings' (`max_payload_bytes`, `max_depth`), as in the processor.
    A shard's fold lists every root it registered (`fold.roots.history`: see `_fold_workers`).
    `progress(lines_read)` is called every 64k lines (never per line: this loop is the hot path)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], YOUNG_GC_THRESHOLD), *thresholds[1:])
    try:
        return _fold_lines(lines if override is None else override.lines(lines), settings, shard, progress)
    finally:
        gc.set_threshold(*thresholds)


def _fold_lines(
    lines: Iterable[bytes],
    settings: FoldSettings | None,
    shard: tuple[int, Shards] | None,
    progress: Callable[[int], None] | None,
) -> FoldResult:
    fold = Fold(settings, emit=False, root_history=shard is not None)  # the document needs views, not outputs
    result = FoldResult(fold)
    max_bytes, max_depth = fold.settings.max_payload_bytes, fold.settings.max_depth
    apply, runs, first_line = fold.apply, fold.runs, result.first_line
    mine, shards = shard if shard is not None else (0, Shards(1))
    route = shards.route if shards.count > 1 else None
    applied = duplicates = 0
    evict = result.deletions.extend
    gc.freeze()  # what exists already (imported modules) need not be re-scanned either
    for lineno, raw in enumerate(lines, 1):
        if not lineno & GC_FREEZE_MASK:
            gc.freeze()  # the kept state is acyclic: stop re-scanning it in every collection
            if progress is not None:
                progress(lineno)
        owner = route(raw) if route is not None else mine
        if (owner != mine and owner != AMBIGUOUS) or not raw or raw.isspace():
            continue
        event = decode_event(raw, max_bytes=max_bytes, max_depth=max_depth)
        if isinstance(event, Rejection):
            if owner == mine or mine == 0:  # an ambiguous line is reported by shard 0 only
                _reject(result, lineno, event)
            continue
        subject = event.subject
        if owner == AMBIGUOUS and shards.of_run(subject) != mine:
            continue
        new_run = subject not in runs
        effects = apply(event)
        if effects.rejection is not None:
            _reject(result, lineno, effects.rejection)
            continue
        applied += 1
        duplicates += effects.duplicate
        if effects.deletions:
            evict(effects.deletions)
        if new_run and subject in runs:
            first_line[subject] = lineno
    gc.freeze()  # and stays frozen: building the document must not re-scan the state either
    result.applied, result.duplicates = applied, duplicates
    return result


def _reject(result: FoldResult, lineno: int, rejection: Rejection) -> None:
    result.rejected.append({"line": lineno, "reason": str(rejection.reason), "message": rejection.message})


def fold_file(
    path: Path,
    settings: FoldSettings | None = None,
    *,
    workers: int = 1,
    with_deletions: bool = True,
    progress: bool = False,
    override: Override | None = None,
) -> tuple[dict[str, Any], list[Deletion]]:
    """Fold a file, in `workers` processes each owning a shard of the runs; returns the
    document and (unless `with_deletions` is False: a dry run needs none) the deletions the
    final state still owes — never a path live at the end of the log (contract §9), not every
    eviction in the file's history.
    One worker folds in this process. `progress`: report on stderr how much of the file is read."""
    job = _Job(settings, with_deletions, as_text=False, progress=progress, override=override)
    runs, rejected, deletions, _, _ = _fold_workers(path, job, workers)
    return {"runs": {run_id: view for _, run_id, view in runs}, "rejected": rejected}, deletions


def fold_file_text(
    path: Path,
    settings: FoldSettings | None = None,
    *,
    workers: int = 1,
    with_deletions: bool = True,
    indent: int | None = None,
    progress: bool = False,
    override: Override | None = None,
) -> tuple[str, list[Deletion]]:
    """`fold_file` with the document as JSON text, the exact bytes of `json.dumps(document)`.
    Each run's view is encoded by its worker and the document is joined from those texts."""
    if indent is not None:
        document, deletions = fold_file(
            path, settings, workers=workers, with_deletions=with_deletions, progress=progress, override=override
        )
        return json.dumps(document, indent=indent), deletions
    job = _Job(settings, with_deletions, as_text=True, progress=progress, override=override)
    runs, rejected, deletions, _, _ = _fold_workers(path, job, workers)
    return _document_text(runs, rejected), deletions


@dataclass(frozen=True, slots=True)
class _Job:
    settings: FoldSettings | None
    with_deletions: bool
    as_text: bool  # workers return each view as JSON text rather than as a dict
    progress: bool = False  # shard 0 reports progress (every shard reads the whole file)
    override: Override | None = None  # `fold --override-*`: run_started lines rewritten (ckptlog/processor/whatif.py)


_Shard = tuple[list[tuple[int, str, Any]], list[dict[str, Any]], list[Deletion], list[tuple[str, str]], int]
"""What one shard returns: runs (first line, run id, view or its JSON text), rejections, deletions,
every storage root its fold registered (root, run id), and the run_finished/run_forgotten events it
folded (`Fold.finishes`)."""


def _fold_workers(path: Path, job: _Job, workers: int) -> _Shard:
    """Runs (in order of first appearance), rejections (by line) and deletions of all shards;
    one worker folds in this process.

    Runs are independent in the fold but for one rule: no two runs' roots may nest (contract §9),
    and a shard sees only its own runs' roots. If no root one shard ever registered nests with a
    root another shard registered, that rule gave every shard the answer one fold would have (the
    first event where they could differ leaves such a pair behind), so the shards are exact;
    otherwise the file is folded again in one process. The other rule that spans runs is the expiry
    of finished records (contract §3): the oldest goes once more than `finished_runs_kept` runs have
    retired in the whole partition, which no shard sees; so the shards are exact only while all of
    them together folded no more run_finished and run_forgotten events than that (each retirement
    takes one), and no record can have expired."""
    if workers <= 1:
        return _fold_shard(str(path), job, None)
    shards = plan(_head_lines(path), workers)
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        parts = pool.starmap(_fold_shard, [(str(path), job, (k, shards)) for k in range(workers)])
    why = None
    if roots_nest([part[3] for part in parts]):
        why = "runs in different shards have storage roots that nest, and only one fold sees every run's root"
        why += " to refuse that (contract §9)"
    elif sum(part[4] for part in parts) > (kept := (job.settings or FoldSettings()).finished_runs_kept):
        why = f"more than --finished-runs-kept {kept} runs finished, and only one fold"
        why += " sees which finished records expire (contract §3)"
    if why is not None:
        sys.stderr.write(("\n" if job.progress else "") + f"ckptlog fold: {why}: folding again in one process\n")
        return _fold_shard(str(path), job, None)
    _end_progress(job.progress)
    runs = sorted((entry for part in parts for entry in part[0]), key=lambda entry: entry[0])
    rejected = sorted((r for part in parts for r in part[1]), key=lambda r: int(r["line"]))
    return runs, rejected, [d for part in parts for d in part[2]], [], 0


def roots_nest(histories: Sequence[Sequence[tuple[str, str]]]) -> bool:
    """Whether a root registered by one shard is equal to, above or below a root registered by
    another (each history lists canonical roots as `(root, run id)`)."""
    shard_of: dict[str, int] = {}
    for shard, history in enumerate(histories):
        for root, _ in history:
            if shard_of.setdefault(root, shard) != shard:
                return True
    for root, shard in shard_of.items():
        at = root.find("/")
        while at > 0:
            above = shard_of.get(root[:at])
            if above is not None and above != shard:
                return True
            at = root.find("/", at + 1)
    return False


def auto_workers(path: Path) -> int:
    """Processes worth forking: one per core for large files, else one (fork costs ~0.1 s)."""
    if path.stat().st_size < PARALLEL_FROM_BYTES:
        return 1
    return max(1, min(os.cpu_count() or 1, 8))


def _head_lines(path: Path) -> list[bytes]:
    """The complete lines in the first SAMPLE_BYTES of the file: what the shard plan counts."""
    with path.open("rb") as stream:
        head = stream.read(SAMPLE_BYTES)
    lines = head.split(b"\n")
    return lines if len(head) < SAMPLE_BYTES else lines[:-1]


def _fold_shard(path: str, job: _Job, shard: tuple[int, Shards] | None) -> _Shard:
    """One shard (or the whole file) folded in this process."""
    show = _progress_of(Path(path)) if job.progress and (shard is None or shard[0] == 0) else None
    with open(path, "rb") as stream:
        tell = stream.tell
        result = fold_lines(
            stream,
            job.settings,
            shard=shard,
            progress=None if show is None else lambda lines: show(lines, tell()),
            override=job.override,
        )
    runs = [
        (result.first_line.get(run_id, 0), run_id, json.dumps(view) if job.as_text else view)
        for run_id, view in result.document()["runs"].items()
    ]
    deletions = result.fold.owed() if job.with_deletions else []
    if shard is None:
        _end_progress(job.progress)
    return runs, result.rejected, deletions, result.fold.roots.history or [], result.fold.finishes


def fold_stream_text(
    stream: Iterable[bytes],
    settings: FoldSettings | None = None,
    *,
    indent: int | None = None,
    override: Override | None = None,
) -> tuple[str, list[Deletion]]:
    """Fold lines read once (stdin) into the document text."""
    result = fold_lines(stream, settings, override=override)
    return json.dumps(result.document(), indent=indent), result.fold.owed()


def _document_text(runs: list[tuple[int, str, Any]], rejected: list[dict[str, Any]]) -> str:
    """The document from each run's view text: the bytes of one `json.dumps(document)`."""
    body = ", ".join(f"{json.dumps(run_id)}: {text}" for _, run_id, text in runs)
    return f'{{"runs": {{{body}}}, "rejected": {json.dumps(rejected)}}}'


def _progress_of(path: Path) -> Callable[[int, int], None]:
    """`show(lines, offset)` reports `ckptlog fold: 1,048,576 lines read (52%)` on stderr, in place."""
    total = path.stat().st_size or 1

    def show(lines: int, offset: int) -> None:
        sys.stderr.write(f"\rckptlog fold: {lines:,} lines read ({100 * offset // total}%)")
        sys.stderr.flush()

    return show


def _end_progress(shown: bool) -> None:
    if shown:
        sys.stderr.write("\rckptlog fold: every line read, writing the document\n")
        sys.stderr.flush()
