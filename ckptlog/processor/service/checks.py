"""After a restore, check that every kept checkpoint still exists (Ray's `_assert_checkpoints_exist`).

Storage is reached through ckptlog.processor.storage's filesystem opener (the only fsspec user);
checks run in worker threads, a few at a time, and a storage error counts as "unknown"
(logged, not reported missing), so a flaky backend never flags or blocks a run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from ckptlog.errors import StorageError
from ckptlog.events.paths import UnsafePath, parse_url
from ckptlog.processor.storage.objects import mapped_errors, open_filesystem

log = logging.getLogger(__name__)


def path_exists(url: str, storage_options: Mapping[str, Mapping[str, Any]] | None = None) -> bool:
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


async def find_missing(
    kept: Mapping[str, list[str]], storage_options: Mapping[str, Mapping[str, Any]] | None = None, concurrency: int = 8
) -> dict[str, list[str]]:
    """run id -> kept paths that do not exist (runs with none missing are left out)."""
    slots = asyncio.Semaphore(concurrency)

    async def check(run_id: str, url: str) -> tuple[str, str, bool]:
        async with slots:
            try:
                return run_id, url, await asyncio.to_thread(path_exists, url, storage_options)
            except StorageError as exc:
                log.warning(
                    "event=checkpoint_check_failed run=%s path=%s error=%r; treated as present", run_id, url, exc
                )
                return run_id, url, True

    results = await asyncio.gather(*(check(run_id, url) for run_id, urls in kept.items() for url in urls))
    missing: dict[str, list[str]] = {}
    for run_id, url, exists in results:
        if not exists:
            missing.setdefault(run_id, []).append(url)
    return missing
