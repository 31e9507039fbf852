"""After a restore, check that every kept checkpoint still exists (Ray's `_assert_checkpoints_exist`).

Storage is reached through ckptlog.processor.storage's filesystem opener (the only fsspec user);
checks run in worker threads, a few at a time, and a storage error counts as "unknown"
(logged, not reported missing), so a flaky backend never flags or blocks a run.

A restore of 100,000 runs keeps 100,000 checkpoints or more: the paths go to `concurrency` threads
of the check's own (the default executor's threads stay free for snapshots and restores) in batches
of `BATCH`, each thread checking its batch one path after another, so the event loop handles a few
thousand hand-overs instead of a task and a hand-over per path (which kept it busy for seconds). A
cancelled check stops its threads after the path each is checking.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from typing import Any

from ckptlog.errors import StorageError
from ckptlog.events.paths import UnsafePath, parse_url
from ckptlog.processor.storage.objects import mapped_errors, open_filesystem

log = logging.getLogger(__name__)

BATCH = 32
"""Paths a thread checks in one hand-over."""

Options = Mapping[str, Mapping[str, Any]] | None


def path_exists(url: str, storage_options: Options = None) -> bool:
    """Whether the checkpoint directory (or file) at `url` exists; StorageError when unknowable."""
    try:
        protocol = parse_url(url).protocol
    except UnsafePath as exc:
        raise StorageError(f"cannot check {url}: {exc}") from None
    options = (storage_options or {}).get(protocol)
    fs, path = open_filesystem(url, options)
    with mapped_errors(url, "check"):
        fs.invalidate_cache(path)
        return bool(fs.exists(path))


def _exists(run_id: str, url: str, storage_options: Options) -> bool:
    """`path_exists`, a storage error counted as present (logged)."""
    try:
        return path_exists(url, storage_options)
    except StorageError as exc:
        log.warning("event=checkpoint_check_failed run=%s path=%s error=%r; treated as present", run_id, url, exc)
        return True


def _missing_of(batch: list[tuple[str, str]], storage_options: Options, stop: threading.Event) -> list[int]:
    """The positions in `batch` of the paths that do not exist (a worker thread's job); stops early
    once `stop` is set (the check was cancelled: nothing is reported then)."""
    missing = []
    for at, (run_id, url) in enumerate(batch):
        if stop.is_set():
            break
        if not _exists(run_id, url, storage_options):
            missing.append(at)
    return missing


async def find_missing(
    kept: Mapping[str, list[str]], storage_options: Options = None, concurrency: int = 8
) -> dict[str, list[str]]:
    """run id -> kept paths that do not exist (runs with none missing are left out), each run's in
    the order given."""
    paths = ((run_id, url) for run_id, urls in kept.items() for url in urls)
    batches: Iterator[list[tuple[str, str]]] = iter(lambda: list(islice(paths, BATCH)), [])
    found: list[tuple[int, list[tuple[str, str]], list[int]]] = []
    stop, numbered, loop = threading.Event(), enumerate(batches), asyncio.get_running_loop()
    threads = ThreadPoolExecutor(concurrency, thread_name_prefix="ckptlog-check")

    async def worker() -> None:
        for number, batch in numbered:  # shared by the workers: each takes the next batch
            positions = await loop.run_in_executor(threads, _missing_of, batch, storage_options, stop)
            found.append((number, batch, positions))

    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        stop.set()  # cancelled: the threads stop after their current path
        threads.shutdown(wait=False)
    missing: dict[str, list[str]] = {}
    for _, batch, positions in sorted(found, key=lambda item: item[0]):
        for at in positions:
            run_id, url = batch[at]
            missing.setdefault(run_id, []).append(url)
    return missing
