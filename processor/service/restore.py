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
import dataclasses
import logging
from dataclasses import dataclass
from typing import Protocol

from processor.core.fold import Fold
from processor.core.settings_diff import describe, differences
from processor.core.snapshot import Snapshot, decode
from processor.core.state import FoldSettings
from processor.errors import OffsetOutOfRange
from processor.failpoints import crash_point
from processor.kafka.records import PartitionId
from processor.service.errors import RestoreError
from processor.storage.snapshots import SnapshotStore

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


def check_snapshot(pid: PartitionId, snapshot: Snapshot, settings: FoldSettings, url: str) -> FoldSettings:
    """Refuse a snapshot of another partition or made with other processor defaults; returns the
    settings to fold on with: the snapshot's own when they differ from this run's only in spelling
    (compared in canonical form, processor.core.settings_diff), so the fold goes on exactly as it was."""
    if (snapshot.topic, snapshot.partition) != tuple(pid):
        raise RestoreError(
            f"{pid}: snapshot under {url} is of {snapshot.topic}[{snapshot.partition}]; point "
            "--snapshots at this input topic's snapshots"
        )
    recorded = snapshot.settings
    if not snapshot.limits_recorded:  # an older schema: the limits it was folded with are not known
        recorded = dataclasses.replace(
            recorded, max_payload_bytes=settings.max_payload_bytes, max_depth=settings.max_depth
        )
    found = differences(recorded, settings)
    if found:
        raise RestoreError(
            f"{pid}: the snapshot at offset {snapshot.next_offset} under {url} was made with other processor "
            f"defaults: {describe(found)}. Restart with the snapshot's value, or rebuild snapshots for the new "
            "one with `ckptlog replay --snapshots NEW_URL` and run with that URL"
        )
    return recorded


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


async def restore(
    pid: PartitionId, offsets: Offsets, store: SnapshotStore, settings: FoldSettings, allow_data_loss: bool
) -> Restored:
    committed = await offsets.committed(pid)
    snapshot = await asyncio.to_thread(store.load_latest, decode, committed or 0)
    crash_point("restore.snapshot_loaded")
    ahead = [o for o in await asyncio.to_thread(store.list_offsets) if o > (committed or 0)]
    if ahead:
        log.warning(
            "event=snapshot_ahead_of_committed partition=%s committed=%s snapshots=%s; restoring from an older "
            "one (a snapshot beyond the group's committed offset would skip publishing the outputs between)",
            pid,
            committed,
            ahead,
        )
    if snapshot is not None:
        settings = check_snapshot(pid, snapshot, settings, store.url)
    log_start, log_end = await offsets.log_start(pid), await offsets.log_end(pid)
    need = snapshot.next_offset if snapshot is not None else 0
    fold = Fold(settings, snapshot.runs, refused=snapshot.refused) if snapshot is not None else Fold(settings)
    if need > log_end:
        raise RestoreError(
            f"{pid}: the snapshot under {store.url} resumes at offset {need}, beyond the log's end "
            f"{log_end}: the topic was re-created or the snapshots belong to another cluster; point "
            "--snapshots at a fresh location (or delete the stale snapshots) and restart"
        )
    start = need
    if need < log_start:
        if not allow_data_loss:
            raise OffsetOutOfRange(lost_message(pid, need, log_start, store.url, snapshot))
        log.error(
            "event=DATA_LOSS partition=%s snapshot_offset=%s log_start=%d lost_offsets=%d message=%r",
            pid,
            snapshot.next_offset if snapshot else None,
            log_start,
            log_start - need,
            "--allow-data-loss: continuing from the log start; events below it are NOT in the state",
        )
        start = log_start
    publish_from = start if committed is None else max(committed, start)
    if committed is not None and committed < start:
        log.warning(
            "event=committed_behind_snapshot partition=%s committed=%d start=%d; outputs of offsets "
            "%d..%d are not re-published",
            pid,
            committed,
            start,
            committed,
            start - 1,
        )
    if snapshot is None and log_end > start:
        warn_full_replay(pid, log_end - start, store.url, start, committed)
    log.info(
        "event=restored partition=%s snapshot_offset=%s log_start=%d log_end=%d committed=%s runs=%d replay=%d",
        pid,
        snapshot.next_offset if snapshot else None,
        log_start,
        log_end,
        committed,
        len(fold.runs),
        max(0, publish_from - start),
    )
    return Restored(fold, start, publish_from, snapshot.next_offset if snapshot is not None else None, log_end)
