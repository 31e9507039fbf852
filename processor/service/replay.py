"""`ckptlog replay`: rebuild every input partition's state into a fresh snapshot set, publishing nothing.

From the start of the log, or from the newest valid snapshot under `--from-snapshot URL`;
each partition is read (read_committed) up to its end offset at the time of the call, folded
exactly as the service folds it, and written as one snapshot under `--snapshots URL`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from processor.core.fold import Fold
from processor.core.snapshot import Snapshot, decode, encode
from processor.errors import OffsetOutOfRange
from processor.kafka.connection import KafkaConnection
from processor.kafka.reader import TopicReader
from processor.kafka.records import PartitionId
from processor.kafka.topics import topic_partitions
from processor.service.batch import BatchFolder
from processor.service.records import RecordFactory, TopicNames
from processor.service.restore import check_snapshot, lost_message
from processor.service.settings import ServiceSettings
from processor.storage.snapshots import SnapshotStore

log = logging.getLogger(__name__)

NEVER = 2**63  # publish_from that suppresses every output
Progress = Callable[[PartitionId, int, int, int], None]  # pid, position, begin, end


@dataclass(frozen=True, slots=True)
class Rebuilt:
    pid: PartitionId
    start: int
    next_offset: int
    runs: int
    events: int
    url: str


async def rebuild(
    settings: ServiceSettings,
    bootstrap: str,
    out_url: str,
    from_snapshot: str | None = None,
    progress: Progress | None = None,
) -> list[Rebuilt]:
    conn = settings.connection(bootstrap)
    count = await topic_partitions(conn, settings.input_topic)
    pids = [PartitionId(settings.input_topic, p) for p in range(count)]
    return [await _rebuild_one(settings, conn, pid, out_url, from_snapshot, progress) for pid in pids]


async def _rebuild_one(
    settings: ServiceSettings,
    conn: KafkaConnection,
    pid: PartitionId,
    out_url: str,
    from_snapshot: str | None,
    progress: Progress | None,
) -> Rebuilt:
    fold_settings = settings.fold_settings()
    fold, start, snapshot = Fold(fold_settings, emit=False), 0, None
    if from_snapshot is not None:
        source = SnapshotStore(from_snapshot, pid.topic, pid.partition)
        snapshot = await asyncio.to_thread(source.load_latest, decode)
        if snapshot is not None:
            check_snapshot(pid, snapshot, fold_settings, source.url)
            fold, start = Fold(fold_settings, snapshot.runs, emit=False), snapshot.next_offset
    names = TopicNames(
        settings.input_topic,
        settings.checkpoints_topic,
        settings.validations_topic,
        settings.watermarks_topic,
        settings.state_topic,
        settings.dlq_topic,
    )
    folder = BatchFolder(fold, RecordFactory(names, pid), settings.max_payload_bytes, settings.max_depth)
    events = 0
    async with TopicReader(conn, pid.topic, [pid.partition], {pid.partition: start}) as reader:
        begin, end = reader.begin[pid], reader.end[pid]
        if start < begin:
            if not settings.allow_data_loss:
                raise OffsetOutOfRange(lost_message(pid, start, begin, from_snapshot or "(none)", snapshot))
            log.error("event=DATA_LOSS partition=%s start=%d log_start=%d", pid, start, begin)
        if progress is not None:
            progress(pid, max(start, begin), begin, end)
        async for batch in reader.batches():
            folder.fold_records(batch, NEVER)
            events += len(batch)
            if progress is not None:
                progress(pid, batch[-1].offset + 1, begin, end)
        next_offset = max(await reader.position(pid), start)
    store = SnapshotStore(out_url, pid.topic, pid.partition, settings.keep_snapshots, settings.snapshot_storage_options)
    data = encode(Snapshot(pid.topic, pid.partition, next_offset, fold_settings, fold.runs))
    url = await asyncio.to_thread(store.write, data, next_offset)
    log.info(
        "event=replayed partition=%s start=%d next_offset=%d events=%d runs=%d url=%s",
        pid,
        start,
        next_offset,
        events,
        len(fold.runs),
        url,
    )
    return Rebuilt(pid, start, next_offset, len(fold.runs), events, url)
