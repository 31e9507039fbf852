"""`ckptlog replay`: rebuild every input partition's state into a fresh snapshot set, publishing nothing.

From the start of the log, or from the newest valid snapshot under `--from-snapshot URL`;
each partition is read (read_committed) up to the processor group's committed offset, folded
exactly as the service folds it, and written as one snapshot under `--snapshots URL`.

Not further: a snapshot holds the state of exactly the committed prefix of the log (contract §7).
The processor publishes the outputs of everything from the group's committed offset on, so a
snapshot beyond it would make a restore skip them (validation requests, dead letters). A
partition the group has no committed offset for gets no snapshot: the processor folds it from
the log's start and publishes everything.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.reader import TopicReader
from ckptlog.kafka.records import PartitionId
from ckptlog.kafka.topics import committed_offsets, topic_partitions
from ckptlog.processor.core.snapshot import encode, of_fold
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.service.batch import BatchFolder
from ckptlog.processor.service.records import RecordFactory, TopicNames
from ckptlog.processor.service.restore import load_snapshot, plan_restore, restored_fold
from ckptlog.processor.service.settings import ServiceSettings
from ckptlog.processor.storage.snapshots import SnapshotStore

log = logging.getLogger(__name__)

NEVER = 2**63  # publish_from that suppresses every output
Progress = Callable[[PartitionId, int, int, int], None]  # pid, position, begin, end


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """One partition's new snapshot; `next_offset` and `url` None: the processor's group has no
    committed offset there, so no snapshot was written (the processor folds it from the start)."""

    pid: PartitionId
    start: int
    next_offset: int | None
    runs: int
    events: int
    url: str | None


async def rebuild(
    settings: ServiceSettings,
    bootstrap: str,
    out_url: str,
    from_snapshot: str | None = None,
    progress: Progress | None = None,
) -> list[Rebuilt]:
    conn = settings.connection(bootstrap)
    count = await topic_partitions(conn, settings.input_topic)
    committed = await committed_offsets(conn, settings.group_id, settings.input_topic, count)
    rebuilt: list[Rebuilt] = []
    for partition in range(count):
        pid = PartitionId(settings.input_topic, partition)
        if partition not in committed:
            rebuilt.append(Rebuilt(pid, 0, None, 0, 0, None))
            continue
        until = committed[partition]
        rebuilt.append(await _rebuild_one(settings, conn, pid, until, out_url, from_snapshot, progress))
    return rebuilt


async def _rebuild_one(
    settings: ServiceSettings,
    conn: KafkaConnection,
    pid: PartitionId,
    until: int,
    out_url: str,
    from_snapshot: str | None,
    progress: Progress | None,
) -> Rebuilt:
    """Fold offsets [start, until) of one partition and snapshot the state at `until`: the same
    choice of snapshot and the same data-loss policy as a restore (ckptlog/processor/service/restore.py)."""
    fold_settings, snapshot, url = settings.fold_settings(), None, from_snapshot or "(none)"
    if from_snapshot is not None:
        source = SnapshotStore(
            from_snapshot, pid.topic, pid.partition, storage_options=settings.snapshot_storage_options
        )
        snapshot, fold_settings = await load_snapshot(pid, source, fold_settings, until)
        url = source.url
    fold = restored_fold(snapshot, fold_settings, emit=False)
    folder = BatchFolder(fold, RecordFactory(TopicNames.of(settings), pid))
    start = snapshot.next_offset if snapshot is not None else 0
    async with TopicReader(conn, pid.topic, [pid.partition], {pid.partition: start}) as reader:
        begin, end = reader.begin[pid], min(reader.end[pid], until)
        plan = plan_restore(pid, snapshot, until, begin, reader.end[pid], settings.allow_data_loss, url)
        if plan.lost:
            log.error("event=DATA_LOSS partition=%s start=%d log_start=%d", pid, start, begin)
        events = await _fold_until(reader, folder, pid, (plan.start, begin, end), until, progress)
    next_offset = max(until, plan.start)
    store = SnapshotStore(out_url, pid.topic, pid.partition, settings.keep_snapshots, settings.snapshot_storage_options)
    crash_point("replay.before_write")
    written = await asyncio.to_thread(
        store.write, encode(of_fold(fold, pid.topic, pid.partition, next_offset)), next_offset
    )
    log.info(
        "event=replayed partition=%s start=%d next_offset=%d events=%d runs=%d url=%s",
        pid,
        plan.start,
        next_offset,
        events,
        len(fold.runs),
        written,
    )
    return Rebuilt(pid, plan.start, next_offset, len(fold.runs), events, written)


async def _fold_until(
    reader: TopicReader,
    folder: BatchFolder,
    pid: PartitionId,
    bounds: tuple[int, int, int],
    until: int,
    progress: Progress | None,
) -> int:
    """Fold the reader's records below `until`; how many were folded."""
    start, begin, end = bounds
    events = 0
    if progress is not None:
        progress(pid, start, begin, end)
    async for batch in reader.batches():
        batch = [record for record in batch if record.offset < until]
        if batch:
            crash_point("replay.batch")
            folder.fold_records(batch, NEVER)
            events += len(batch)
            if progress is not None:
                progress(pid, batch[-1].offset + 1, begin, end)
        if not batch or batch[-1].offset + 1 >= until:
            break
    return events
