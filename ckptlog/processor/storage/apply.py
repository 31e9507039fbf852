"""Carrying out a batch of deletions to the end, for offline use (`ckptlog fold --apply`).

The long-running processor submits to a `Deleter` and carries on; a one-shot command has
nothing to carry on with, so it waits here for the same confined, retried deletions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from ckptlog.processor.storage.deletion import Deleter, DeletionRequest, RetryPolicy

DEFAULT_RETRY = RetryPolicy()


def delete_now(
    deletions: Iterable[DeletionRequest],
    outer_root: str | None = None,
    storage_options: Mapping[str, Mapping[str, Any]] | None = None,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> list[str]:
    """Delete every path, waiting for retries; one message per path refused or not deleted."""
    return asyncio.run(_delete_all(list(deletions), outer_root, storage_options, retry))


async def _delete_all(
    deletions: list[DeletionRequest],
    outer_root: str | None,
    storage_options: Mapping[str, Mapping[str, Any]] | None,
    retry: RetryPolicy,
) -> list[str]:
    every: list[tuple[tuple[str, str], str]] = []  # each refusal (`Deleter.refused` keeps only the latest)
    deleter = Deleter(outer_root=outer_root, storage_options=storage_options, retry=retry, on_refused=every.extend)
    deleter.submit_many(deletions)
    await deleter.drain()
    await deleter.close()
    refused = [
        f"refused to delete {path} for run {run_id}: {why}; nothing was deleted"
        for (run_id, path), why in dict(every).items()
    ]
    failed = [
        f"could not delete {path} for run {run_id}: {why}; run the command again"
        for (run_id, path), why in deleter.failed.items()
    ]
    return sorted(refused) + sorted(failed)
