"""Deletion completions: `ckptlog.deletion_completed.v2` written back to the input partition.

They go through a plain idempotent producer, not the partition's transactions: a completion
is an idempotent fact ("this path is gone"), so it needs no atomicity with anything, and
keeping our own records out of the input partition's transactions means the processor never
holds back its own input (a read_committed consumer cannot read past an open transaction's
first record). Queued completions are sent every `interval_s`; a failed send is logged and
retried with the next flush; at worst (a crash) the deletion is resubmitted after restore.

`DeletionOutcomes` holds the deleter's callbacks: what it confirmed or refused for good goes to the
task of the partition whose state holds the run, and becomes completion events on that partition;
its last-moment re-check (contract §9) asks that task too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from itertools import groupby
from typing import Protocol, TypeVar

from ckptlog.errors import CkptlogError
from ckptlog.kafka.records import OutRecord
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.service.pipeline import run_of
from ckptlog.processor.service.ports import SharedProducer

log = logging.getLogger(__name__)


class CompletionWriter:
    def __init__(self, producer: SharedProducer, interval_s: float = 0.05) -> None:
        self._producer, self._interval_s = producer, interval_s
        self._queue: list[OutRecord] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.written = 0

    def extend(self, records: list[OutRecord]) -> None:
        if records:
            self._queue.extend(records)
            self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.flush()
            await asyncio.sleep(self._interval_s)  # gather what arrives meanwhile into one send

    async def flush(self) -> None:
        batch, self._queue = self._queue, []
        if not batch:
            return
        try:
            crash_point("completions.before_send")
            await self._producer.publish(batch)
            crash_point("completions.sent")
        except CkptlogError as exc:
            log.warning("event=completions_failed count=%d error=%s; retrying with the next flush", len(batch), exc)
            self._queue[:0] = batch
            return
        self.written += len(batch)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.flush()


_T = TypeVar("_T")


def _run_of_refusal(refusal: tuple[tuple[str, str], str]) -> str:
    return refusal[0][0]


NOT_OWNED = "its partition is not owned by this instance any more (the new owner re-drives it)"
"""Why a path of a run no partition of this instance holds is not deleted now."""


class RunOwner(Protocol):
    """A partition's task (partition.py `PartitionTask`), as the deleter's outcomes reach it."""

    def owns(self, run_id: str) -> bool: ...

    def deletions_settled(
        self, done: Sequence[tuple[str, str]], refused: Sequence[tuple[tuple[str, str], str]] = ()
    ) -> list[OutRecord]: ...

    def still_owed_many(self, run_id: str, paths: Sequence[str]) -> list[str | None]: ...


class DeletionOutcomes:
    """The deleter's `on_done`, `on_refused` and `recheck` (see the module docstring); `tasks` gives the
    tasks of this instance's partitions, `writer` is set once the shared producer has started."""

    def __init__(self, tasks: Callable[[], Iterable[RunOwner]]) -> None:
        self._tasks = tasks
        self.writer: CompletionWriter | None = None

    def _owner(self, run_id: str) -> RunOwner | None:
        """The task of the partition whose state holds the run (None: not this instance's)."""
        for task in self._tasks():  # per run of a job: a loop, not a generator made per call
            if task.owns(run_id):
                return task
        return None

    def _by_owner(self, items: Iterable[_T], run_of_item: Callable[[_T], str]) -> list[tuple[RunOwner, list[_T]]]:
        """`items` (grouped by run, as a job or call hands them) by the task owning their run, each
        owner looked up once per run; the items of runs no task of this instance owns are left out."""
        by_owner: dict[int, tuple[RunOwner, list[_T]]] = {}
        for run_id, group in groupby(items, run_of_item):
            owner = self._owner(run_id)
            if owner is not None:
                by_owner.setdefault(id(owner), (owner, []))[1].extend(group)
        return list(by_owner.values())

    def done(self, done: Sequence[tuple[str, str]]) -> None:
        """Confirmed deletions (one Deleter job's worth) become completion events on their runs' partitions.

        A job's keys come grouped by run (a batch's evictions are submitted sorted by run), so the
        owner is looked up once per run and the keys are moved in slices, not one by one."""
        if self.writer is None:
            return
        for owner, owned in self._by_owner(done, run_of):
            self.writer.extend(owner.deletions_settled(owned))

    def refused(self, refused: Sequence[tuple[tuple[str, str], str]]) -> None:
        """Deletions the deleter will never carry out (contract §9) are settled too, so the run's state
        says so (a `deletion_refused` warning) instead of owing them forever. Like `done`: the owner
        looked up once per run (a call's refusals come grouped by run), one completion per run and call."""
        if self.writer is None:
            return
        for owner, owned in self._by_owner(refused, _run_of_refusal):
            self.writer.extend(owner.deletions_settled((), owned))

    def still_owed(self, key: tuple[str, str]) -> str | None:
        """The deleter's last-moment re-check (contract §9): why not to delete now, or None."""
        return self.still_owed_many([key])[0]

    def still_owed_many(self, keys: Sequence[tuple[str, str]]) -> list[str | None]:
        """`still_owed` for one Deleter job's keys, in order: the owner looked up once per run (a job's
        keys come grouped by run) and asked once for that run's paths."""
        whys: list[str | None] = []
        for run_id, group in groupby(keys, run_of):
            paths = [path for _, path in group]
            owner = self._owner(run_id)
            whys += owner.still_owed_many(run_id, paths) if owner is not None else [NOT_OWNED] * len(paths)
        return whys
