"""The processor's restores (an assignment's, a retry, a rebuild), run beside the poll loop instead of
inside the assignment callback or the loop.

aiokafka sends no heartbeats while its `on_partitions_assigned` callback runs, so a restore awaited
there that outlasts the session timeout cost the member its partitions, and the next assignment
restored them again, in a loop (docs/processor.md, "Restores run beside the group's heartbeats").
The callback now starts a job here and returns; the partitions stay paused until the driver
seeks them (`PartitionDriver._activate`). A retry or a rebuild awaited in the poll loop stalled
every other partition's batches while it ran; they are jobs here too.

Jobs run one after the other: a job waits for the ones started before it, so two restores of one
partition (a void one a rebalance overtook, and the new assignment's) never run side by side — under
exactly_once each would start the partition's transactional producer and fence the other's. A job
that raises reports its error (`on_error`: the processor stops); `settle` waits for every job (shutdown).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


class RestoreJobs:
    """Background restore jobs of one processor: tracked, run in order, awaited at shutdown."""

    def __init__(self, on_error: Callable[[BaseException, str], None]) -> None:
        self._on_error = on_error
        self._jobs: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        """Jobs not finished yet."""
        return len(self._jobs)

    def start(self, restore: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        """Run `restore()` once every job started before it has finished."""
        job = asyncio.create_task(self._after(set(self._jobs), restore), name=name)
        self._jobs.add(job)
        job.add_done_callback(self._finished)

    @staticmethod
    async def _after(earlier: set[asyncio.Task[None]], restore: Callable[[], Coroutine[Any, Any, None]]) -> None:
        if earlier:
            await asyncio.wait(earlier)  # their outcomes are theirs to report (`_finished`)
        await restore()

    def _finished(self, job: asyncio.Task[None]) -> None:
        self._jobs.discard(job)
        if not job.cancelled() and (error := job.exception()) is not None:
            self._on_error(error, job.get_name())

    async def settle(self) -> None:
        """Wait until every job, including any started meanwhile, has finished."""
        while self._jobs:
            await asyncio.wait(set(self._jobs))
