"""Where `history`, `explain` and `inspect --as-of` read from: a run's input partition, replayed
from the log start (history) or from the newest snapshot at or before the moment asked for
(`--as-of`), with the fold settings the processor's snapshots record (contract §10).

The shell around ckptlog/processor/explain/run_replay.py: Kafka and the snapshot store in, a finished
`RunReplay` out. A replay whose split folds were not exact is done again as one fold.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from ckptlog.errors import CkptlogError, ConfigError, OffsetOutOfRange
from ckptlog.events.outputs import WARNING
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.reader import TopicReader, offsets_at, partition_of
from ckptlog.kafka.records import PartitionId
from ckptlog.kafka.topics import topic_partitions
from ckptlog.processor.core.snapshot import Snapshot, decode_settings
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.core.view import View, run_view
from ckptlog.processor.explain.run_replay import RunReplay
from ckptlog.processor.service.restore import read_snapshot
from ckptlog.processor.service.settings import ServiceSettings
from ckptlog.processor.storage.snapshots import SnapshotStore

log = logging.getLogger(__name__)

Progress = Callable[[PartitionId, int, int, int], None]  # pid, position, begin, end
Moment = int | datetime
"""An offset of the run's input partition, or a time (compared with the records' broker timestamps)."""


@dataclass(frozen=True, slots=True)
class Replayed:
    """A partition replayed for some runs: from `start` (the log start, or `snapshot`'s offset)
    up to `end` (exclusive); `exact` False: it was done again as one fold of every run."""

    pid: PartitionId
    replay: RunReplay
    start: int
    end: int
    snapshot: int | None
    split: bool


async def partitions_of(conn: KafkaConnection, topic: str, runs: Iterable[str]) -> dict[int, set[str]]:
    """The input partition of each run (Kafka's default partitioner, by run id), runs grouped by it."""
    count = await topic_partitions(conn, topic)
    grouped: dict[int, set[str]] = {}
    for run_id in runs:
        grouped.setdefault(partition_of(_key(run_id), count), set()).add(run_id)
    return grouped


def _key(run_id: str) -> bytes:
    try:
        return run_id.encode()
    except UnicodeEncodeError:  # raw bytes a shell passed as surrogates: no producer keyed a record so
        shown = run_id.encode("utf-8", "backslashreplace").decode()
        raise ConfigError(f"run id {shown!r} is not UTF-8 text; give it as the run reported it") from None


def _store(settings: ServiceSettings, pid: PartitionId) -> SnapshotStore:
    return SnapshotStore(
        settings.snapshots, pid.topic, pid.partition, storage_options=settings.snapshot_storage_options
    )


async def _snapshot(store: SnapshotStore, at_or_below: int | None) -> Snapshot | None:
    return await asyncio.to_thread(read_snapshot, store, at_or_below)


async def replay_runs(
    conn: KafkaConnection,
    settings: ServiceSettings,
    partition: int,
    runs: Iterable[str],
    *,
    until: int | None = None,
    as_of: bool = False,
    every_run: bool = False,
    progress: Progress | None = None,
) -> Replayed:
    """Replay `partition` for `runs` up to offset `until` (exclusive; None: its current end).
    `as_of`: start from the newest snapshot at or below `until` (the state at a moment); else
    from the log start (a whole history), or from the oldest snapshot the log still reaches when
    retention has deleted its start. `every_run`: one fold of every run (the state of all of them)."""
    pid = PartitionId(settings.input_topic, partition)
    store = _store(settings, pid)
    start_from = await _snapshot(store, until) if as_of else None
    runs = set(runs)
    async with TopicReader(conn, pid.topic, [partition], stop={} if until is None else {partition: until}) as reader:
        begin = reader.begin[pid]
        start = start_from.next_offset if start_from is not None else 0
        if begin > start and (until is None or start < until):  # records it needs are gone (none when start == until)
            start_from = await _oldest_reaching(store, pid, begin, until)
        if start_from is not None:
            fold_settings = start_from.settings
        else:  # the settings the processor folds with: any snapshot of it has them
            found: FoldSettings | None = await asyncio.to_thread(store.load_latest, _settings_of)
            fold_settings = found if found is not None else settings.fold_settings()
        replay = await _replay(reader, pid, RunReplay(fold_settings, runs, start_from, whole=every_run), progress)
        split = replay.context is not None
        if not replay.exact():
            log.warning(
                "event=history_refold partition=%s runs=%d: another run's storage root nests with one of these "
                "runs' (contract §9), which only one fold of every run decides: replaying again as one fold",
                pid,
                len(runs),
            )
            again = None if start_from is None else await _snapshot(store, start_from.next_offset)  # a fresh copy
            replay = await _replay(reader, pid, RunReplay(fold_settings, runs, again, whole=True), progress)
    at = start_from.next_offset if start_from is not None else None
    return Replayed(pid, replay, at or 0, replay.position, at, split)


def _settings_of(chain: list[bytes], _sha256s: list[str]) -> FoldSettings:
    return decode_settings(chain[-1])  # a delta holds its chain's settings too


async def _oldest_reaching(store: SnapshotStore, pid: PartitionId, begin: int, until: int | None) -> Snapshot:
    """The oldest snapshot at or after the log start `begin` (and not after `until`), else why not."""
    offsets = sorted(o for o in await asyncio.to_thread(store.list_offsets) if o >= begin)
    offsets = [o for o in offsets if until is None or o <= until]
    snapshot = await _snapshot(store, offsets[0]) if offsets else None
    if snapshot is None or snapshot.next_offset < begin:
        raise OffsetOutOfRange(
            f"{pid}: the input log starts at offset {begin} (retention deleted the records before it) and no "
            f"snapshot under {store.url} starts at or after it{'' if until is None else f' and at or before {until}'}: "
            "the events before cannot be replayed; give --snapshots the processor's snapshot URL, or ask for a "
            f"moment at or after offset {begin}"
        )
    return snapshot


async def _replay(reader: TopicReader, pid: PartitionId, replay: RunReplay, progress: Progress | None) -> RunReplay:
    """Feed `replay` the partition from where it starts up to the reader's end (one reader serves
    every replay of a call: its clients and offsets are looked up once)."""
    reader.seek(pid, replay.position)
    begin, end = reader.begin[pid], reader.end[pid]
    async for batch in reader.raw_batches():
        replay.feed(batch)
        if progress is not None and batch:
            progress(pid, batch[-1].offset + 1, begin, end)
    replay.position = max(replay.position, end)
    return replay


def _offset(moment: int) -> int:
    if moment < 0:
        raise ConfigError(f"input offset {moment}: an offset is 0 or more (or give a time)")
    return moment


async def offset_after(conn: KafkaConnection, topic: str, partition: int, moment: Moment) -> int:
    """The first offset after `moment`: the offset + 1, or the first record stamped later than the time."""
    if isinstance(moment, int):
        return _offset(moment) + 1
    return (await offsets_at(conn, topic, _epoch_ms(moment) + 1))[partition]


async def offset_from(conn: KafkaConnection, topic: str, partition: int, moment: Moment) -> int:
    """The first offset at or after `moment`."""
    if isinstance(moment, int):
        return _offset(moment)
    return (await offsets_at(conn, topic, _epoch_ms(moment)))[partition]


def _epoch_ms(moment: datetime) -> int:
    """The time in ms since the epoch; a time before it is the epoch (no record is older, and Kafka
    reads a negative time as "latest" or "earliest", which aiokafka refuses)."""
    return max(0, int(moment.timestamp() * 1000))


async def history_of(
    conn: KafkaConnection,
    settings: ServiceSettings,
    run_id: str,
    to: Moment | None = None,
    progress: Progress | None = None,
) -> Replayed:
    """The run's whole story up to `to` (inclusive; None: the log's end)."""
    [(partition, _)] = (await partitions_of(conn, settings.input_topic, [run_id])).items()
    until = None if to is None else await offset_after(conn, settings.input_topic, partition, to)
    return await replay_runs(conn, settings, partition, [run_id], until=until, progress=progress)


async def elsewhere(conn: KafkaConnection, settings: ServiceSettings, run_id: str, partition: int) -> list[Replayed]:
    """Replays of the input partitions other than the run id's `partition` that hold events of the
    run: keyless ones (the producer placed them) or ones produced to an explicit partition. The
    processor folded those where they landed; history reads the run id's partition only, so this
    is only asked when it found nothing there (a whole-topic scan). A partition that cannot be
    replayed (retention, no snapshot) is skipped."""
    found = []
    for other in range(await topic_partitions(conn, settings.input_topic)):
        if other == partition:
            continue
        try:
            replayed = await replay_runs(conn, settings, other, [run_id])
        except CkptlogError:
            continue
        if replayed.replay.steps[run_id]:
            found.append(replayed)
    return found


@dataclass(frozen=True, slots=True)
class AsOf:
    """The state right after `moment`: each run's VIEW, its rejected events and warnings so far (for
    the runs asked for), and per input partition the offset replayed up to (exclusive)."""

    views: dict[str, View]
    rejected: dict[str, int]
    warned: dict[str, int]
    positions: dict[int, int]


async def views_as_of(
    conn: KafkaConnection,
    settings: ServiceSettings,
    runs: Iterable[str],
    moment: Moment,
    progress: Progress | None = None,
) -> AsOf:
    """The VIEWs of `runs` (none: every run of every partition) right after `moment`: from the newest
    snapshot at or before it plus a replay, or from the log start (contract §10)."""
    wanted = sorted(set(runs))
    if wanted:
        groups = await partitions_of(conn, settings.input_topic, wanted)
    else:
        groups = {p: set() for p in range(await topic_partitions(conn, settings.input_topic))}
    views: dict[str, View] = {}
    rejected: dict[str, int] = {}
    warned: dict[str, int] = {}
    positions: dict[int, int] = {}
    for partition, members in sorted(groups.items()):
        until = await offset_after(conn, settings.input_topic, partition, moment)
        replayed = await replay_runs(
            conn, settings, partition, members, until=until, as_of=True, every_run=not members, progress=progress
        )
        replay = replayed.replay
        positions[partition] = replayed.end
        # the hot state only, as `ckptlog fold` of the prefix: a finished run that left it (and a
        # forgotten one) has no state then, wherever the snapshot the replay started from lies
        states = {r: replay.fold.runs.get(r) for r in members} if members else dict(replay.fold.runs)
        views.update({r: run_view(state) for r, state in states.items() if state is not None})
        for run_id, steps in replay.steps.items():
            effects = [e["kind"] for s in steps for e in s.effects]
            rejected[run_id], warned[run_id] = effects.count("rejected"), effects.count(WARNING.name)
    return AsOf(views, rejected, warned, positions)
