"""Restore one input partition: newest valid snapshot, the log's bounds, the group's offset.

Decides where to seek (`start`) and from which offset outputs are published again
(`publish_from`: the group's committed offset; everything before it was published by an
earlier owner and is only replayed into state). A snapshot ahead of the committed offset
(`ckptlog replay` of an older build wrote them at the log end) is passed over: restoring from
it would skip publishing the outputs between (contract §7). Without a committed offset nothing is
known to be published, so the fold starts from the log's start and publishes everything.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from ckptlog.errors import OffsetOutOfRange
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.core.chain import Chain
from ckptlog.processor.core.delta import decode_chain
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.settings_diff import describe, differences
from ckptlog.processor.core.snapshot import Snapshot
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.service.errors import RestoreError
from ckptlog.processor.storage.snapshots import SnapshotStore

log = logging.getLogger(__name__)


class Offsets(Protocol):
    async def log_start(self, pid: PartitionId) -> int: ...

    async def log_end(self, pid: PartitionId) -> int: ...

    async def committed(self, pid: PartitionId) -> int | None: ...


@dataclass(slots=True)
class Restored:
    fold: Fold
    start: int
    publish_from: int
    snapshot_offset: int | None
    log_end: int = 0  # the log's end at restore: deletions owed are re-driven once folded this far
    chain: Chain | None = None  # the snapshot chain restored from: the next delta goes on it


def check_snapshot(pid: PartitionId, snapshot: Snapshot, settings: FoldSettings, url: str) -> FoldSettings:
    """Refuse a snapshot of another partition or made with other processor defaults; returns the
    settings to fold on with: the snapshot's own when they differ from this run's only in spelling
    (compared in canonical form, ckptlog.processor.core.settings_diff), so the fold goes on exactly as it was."""
    if (snapshot.topic, snapshot.partition) != tuple(pid):
        raise RestoreError(
            f"{pid}: snapshot under {url} is of {snapshot.topic}[{snapshot.partition}]; point "
            "--snapshots at this input topic's snapshots"
        )
    found = differences(snapshot.settings, settings)
    if found:
        raise RestoreError(
            f"{pid}: the snapshot at offset {snapshot.next_offset} under {url} was made with other processor "
            f"defaults: {describe(found)}. Restart with the snapshot's value, or rebuild snapshots for the new "
            "one with `ckptlog replay --snapshots NEW_URL` and run with that URL"
        )
    return snapshot.settings


def lost_message(pid: PartitionId, need: int, log_start: int, url: str, snapshot: Snapshot | None) -> str:
    what = (
        f"the newest snapshot under {url} resumes at offset {need}"
        if snapshot is not None
        else f"there is no snapshot under {url}, so state must be rebuilt from offset 0"
    )
    return (
        f"{pid}: {what}, but the log now starts at offset {log_start} (offsets {need}..{log_start - 1} were "
        "deleted by retention or DeleteRecords), so the state cannot be rebuilt. Restore the snapshots, or "
        f"restart with --allow-data-loss to continue from offset {log_start} without those events"
    )


def warn_full_replay(pid: PartitionId, records: int, url: str, start: int, committed: int | None) -> None:
    """A restore without a snapshot folds the whole log: say so, and why (issue 17)."""
    why = f"no snapshot under {url}" if committed is not None else "the group has no committed offset"
    log.warning(
        "event=full_replay partition=%s records=%d snapshots=%s: %s, so the fold starts from offset %d "
        "and reads the whole log (see --snapshots, docs/processor.md Restore)",
        pid,
        records,
        url,
        why,
        start,
    )


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """Where a partition's fold starts and what it publishes again: decided by `plan_restore`."""

    start: int  # the first offset the fold reads
    publish_from: int  # outputs of offsets from here on are published (below: state only)
    lost: int = 0  # records below the log start the state goes on without (--allow-data-loss)


def plan_restore(
    pid: PartitionId,
    snapshot: Snapshot | None,
    committed: int | None,
    log_start: int,
    log_end: int,
    allow_data_loss: bool,
    url: str,
) -> RestorePlan:
    """The one restore policy (contract §6), for the processor and for `ckptlog replay`. Pure.

    The fold resumes at the snapshot's offset (the log start without one); a snapshot beyond
    the log's end is refused; offsets the log no longer holds are data loss, refused unless
    `allow_data_loss` (then the fold starts at the log start); outputs are published again from
    the group's committed offset (from the start when nothing is committed)."""
    need = snapshot.next_offset if snapshot is not None else 0
    if need > log_end:
        raise RestoreError(
            f"{pid}: the snapshot under {url} resumes at offset {need}, beyond the log's end "
            f"{log_end}: the topic was re-created or the snapshots belong to another cluster; point "
            "--snapshots at a fresh location (or delete the stale snapshots) and restart"
        )
    start = need
    if need < log_start:
        if not allow_data_loss:
            raise OffsetOutOfRange(lost_message(pid, need, log_start, url, snapshot))
        start = log_start
    publish_from = start if committed is None else max(committed, start)
    return RestorePlan(start, publish_from, start - need)


class _GcPause:
    """Counts the threads that want no cyclic garbage collection; the last one out turns it back on
    (if it was on when the first one came)."""

    def __init__(self) -> None:
        self.lock, self.count, self.was_enabled = threading.Lock(), 0, False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self.lock:
            self.count += 1
            if self.count == 1:
                self.was_enabled = gc.isenabled()
                gc.disable()
        try:
            yield
        finally:
            with self.lock:
                self.count -= 1
                if self.count == 0 and self.was_enabled:
                    gc.enable()


paused_gc = _GcPause()
"""No cyclic garbage collection meanwhile: decoding a snapshot allocates millions of objects that all
stay, and the collector's passes over them took half of a 100,000-run restore."""


def read_snapshot(store: SnapshotStore, at_or_below: int | None) -> Snapshot | None:
    """The newest restore point at or below `at_or_below` that verifies (a worker thread's job)."""
    with paused_gc():
        return store.load_latest(decode_chain, at_or_below)


async def load_snapshot(
    pid: PartitionId, store: SnapshotStore, settings: FoldSettings, at_or_below: int
) -> tuple[Snapshot | None, FoldSettings]:
    """The newest snapshot at or below `at_or_below` that verifies, checked against this run's
    settings (RestoreError when it is of another partition or other settings), and the settings
    to fold on with (the snapshot's, when they differ only in spelling)."""
    snapshot = await asyncio.to_thread(read_snapshot, store, at_or_below)
    crash_point("restore.snapshot_loaded")
    if snapshot is None:
        return None, settings
    return snapshot, check_snapshot(pid, snapshot, settings, store.url)


def restored_fold(snapshot: Snapshot | None, settings: FoldSettings, *, emit: bool = True, track: bool = False) -> Fold:
    """The fold a snapshot holds (refused runs included), or a fresh one; `track`: it notes what
    changes, for incremental snapshots (ckptlog/processor/core/delta.py)."""
    if snapshot is None:
        return Fold(settings, emit=emit, track_changes=track)
    return Fold(
        settings,
        snapshot.runs,
        emit=emit,
        refused=snapshot.refused,
        finished=snapshot.finished,
        symlinked=snapshot.symlinked,
        retired=snapshot.retired,
        track_changes=track,
    )


def _built(snapshot: Snapshot | None, settings: FoldSettings) -> Fold:
    with paused_gc():
        return restored_fold(snapshot, settings, track=True)


async def restore(
    pid: PartitionId, offsets: Offsets, store: SnapshotStore, settings: FoldSettings, allow_data_loss: bool
) -> Restored:
    committed = await offsets.committed(pid)
    snapshot, settings = await load_snapshot(pid, store, settings, committed or 0)
    ahead = [o for o in await asyncio.to_thread(store.list_offsets) if o > (committed or 0)]
    if ahead:
        log.warning(
            "event=snapshot_ahead_of_committed partition=%s committed=%s snapshots=%s; restoring from an older "
            "one (a snapshot beyond the group's committed offset would skip publishing the outputs between)",
            pid,
            committed,
            ahead,
        )
    log_start, log_end = await offsets.log_start(pid), await offsets.log_end(pid)
    plan = plan_restore(pid, snapshot, committed, log_start, log_end, allow_data_loss, store.url)
    fold = await asyncio.to_thread(_built, snapshot, settings)  # 100,000 runs: their roots registered, ~0.2 s
    _log_plan(pid, plan, snapshot, committed, (log_start, log_end), store.url, len(fold.runs))
    if snapshot is None:
        return Restored(fold, plan.start, plan.publish_from, None, log_end)
    return Restored(fold, plan.start, plan.publish_from, snapshot.next_offset, log_end, snapshot.chain)


def _log_plan(
    pid: PartitionId,
    plan: RestorePlan,
    snapshot: Snapshot | None,
    committed: int | None,
    bounds: tuple[int, int],
    url: str,
    runs: int,
) -> None:
    log_start, log_end = bounds
    snapshot_offset = snapshot.next_offset if snapshot is not None else None
    if plan.lost:
        log.error(
            "event=DATA_LOSS partition=%s snapshot_offset=%s log_start=%d lost_offsets=%d message=%r",
            pid,
            snapshot_offset,
            log_start,
            plan.lost,
            "--allow-data-loss: continuing from the log start; events below it are NOT in the state",
        )
    if committed is not None and committed < plan.start:
        log.warning(
            "event=committed_behind_snapshot partition=%s committed=%d start=%d; outputs of offsets "
            "%d..%d are not re-published",
            pid,
            committed,
            plan.start,
            committed,
            plan.start - 1,
        )
    if snapshot is None and log_end > plan.start:
        warn_full_replay(pid, log_end - plan.start, url, plan.start, committed)
    log.info(
        "event=restored partition=%s snapshot_offset=%s log_start=%d log_end=%d committed=%s runs=%d replay=%d",
        pid,
        snapshot_offset,
        log_start,
        log_end,
        committed,
        runs,
        max(0, plan.publish_from - plan.start),
    )
