"""The Pipeline through PartitionTask, with commits held open: the order of the six stages, the
pipelining, and the one decision to snapshot (only ever the committed prefix of the log)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

from ckptlog.kafka.records import OutRecord, PartitionId
from ckptlog.processor.core.delta import decode_chain
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.snapshot import Snapshot, encode
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.service.batch import BatchFolder
from ckptlog.processor.service.harness import workload
from ckptlog.processor.service.partition import PartitionTask, TaskParts, new_task
from ckptlog.processor.service.records import RecordFactory, TopicNames
from ckptlog.processor.service.restore import Restored
from ckptlog.processor.service.snapshotting import SnapshotScheduler
from ckptlog.processor.storage.snapshots import SnapshotStore
from tests.unit.service.test_batch import records
from tests.unit.service.test_partition import Storage

PID = PartitionId("in", 0)
LINES = workload("file:///nowhere/r", runs=2, reports=60, keep=1, validation_share=0.0)


def _blocks(runs: int = 8, size: int = 5) -> list[bytes]:
    """Every run's run_started, then five events of one run, then five of the next: a batch of five
    changes one run of eight."""
    lines = workload("file:///nowhere/r", runs=runs, reports=200, keep=1, validation_share=0.0)
    by_run = [[line for line in lines if json.loads(line)["subject"] == f"run-{r}"] for r in range(runs)]
    out = [mine[0] for mine in by_run]
    for start in range(1, min(map(len, by_run)) - size, size):
        for mine in by_run:
            out.extend(mine[start : start + size])
    return out


BLOCKS = _blocks()
NAMES = TopicNames("in", "c", "v", "w", "s", "d")


class HeldPublisher:
    """Each commit waits until the test releases it."""

    def __init__(self) -> None:
        self.gates: list[asyncio.Event] = []
        self.commits: list[dict[PartitionId, int]] = []

    async def start(self) -> None:
        return None

    async def commit(self, out: Sequence[OutRecord], offsets: dict[PartitionId, int]) -> None:
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        self.commits.append(dict(offsets))

    async def close(self) -> None:
        return None


class RecordingStore(SnapshotStore):
    """Keeps every snapshot written; `hold` makes writes wait."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(str(tmp_path / "snaps"), PID.topic, PID.partition)
        self.written: list[tuple[int, bytes]] = []
        self.hold: asyncio.Event | None = None
        self.loop = asyncio.get_running_loop()

    def write(
        self, data: bytes, next_offset: int, on: tuple[int, str] | None = None, *, sha256: str | None = None
    ) -> str:
        if self.hold is not None:  # a worker thread: wait for the loop's event
            asyncio.run_coroutine_threadsafe(self.hold.wait(), self.loop).result()
        self.written.append((next_offset, data))
        return super().write(data, next_offset, on, sha256=sha256)

    def state_at(self, offset: int) -> bytes:
        """The full snapshot the objects written up to `offset` restore to (a base and its deltas)."""
        restored = self.load_latest(decode_chain, offset)
        assert restored is not None and restored.next_offset == offset
        return encode(restored)


def task_with(
    tmp_path: Path, every: int, max_deltas: int = 0
) -> tuple[PartitionTask, HeldPublisher, Storage, RecordingStore]:
    fold, store = Fold(FoldSettings(), track_changes=max_deltas > 0), RecordingStore(tmp_path)
    publisher, storage = HeldPublisher(), Storage()
    snapshots = SnapshotScheduler(PID, store, every, 3600, None, max_deltas=max_deltas)
    task = new_task(
        PID, Restored(fold, 0, 0, None), TaskParts(publisher, RecordFactory(NAMES, PID), snapshots, storage, storage)
    )
    task.catch_up()
    return task, publisher, storage, store


def committed_prefix(offset: int, lines: list[bytes] = LINES) -> bytes:
    """The snapshot of a fold that applied exactly lines[:offset]."""
    fold = Fold(FoldSettings())
    BatchFolder(fold, RecordFactory(NAMES, PID)).fold_records(records(lines[:offset]), 0)
    return encode(Snapshot(PID.topic, PID.partition, offset, fold.settings, fold.runs))


async def turn() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_the_next_batch_folds_while_one_commits_and_deletions_wait_for_the_commit(tmp_path: Path) -> None:
    task, publisher, storage, _ = task_with(tmp_path, every=10_000)
    await task.process(records(LINES[:10]))  # folded; its commit is held open
    second = asyncio.create_task(task.process(records(LINES[10:20], start=10)))
    await turn()
    assert task.pipeline.folded_offset == 20 and task.pipeline.next_offset == 0  # folded ahead while the first commits
    assert len(publisher.gates) == 1 and not storage.submitted  # one transaction at a time; nothing deleted
    publisher.gates[0].set()
    await turn()
    assert task.pipeline.next_offset == 10 and storage.submitted  # step 4 follows step 3
    submitted = len(storage.submitted)
    await second
    assert len(publisher.gates) == 2 and len(storage.submitted) == submitted  # the second is not yet durable
    publisher.gates[1].set()
    assert await task.wait_committed() and publisher.commits == [{PID: 10}, {PID: 20}]


async def test_snapshots_hold_exactly_the_committed_prefix(tmp_path: Path) -> None:
    task, publisher, _, store = task_with(tmp_path, every=5)
    await task.process(records(LINES[:10]))
    second = asyncio.create_task(task.process(records(LINES[10:20], start=10)))
    await turn()
    publisher.gates[0].set()  # 10 committed and due, but the fold is already at 20: no snapshot at 10
    await second
    publisher.gates[1].set()
    await task.wait_committed()  # 20 committed, fold at 20: the commit's step 5 takes it
    await task.snapshots.wait()
    assert [offset for offset, _ in store.written] == [20]
    third = asyncio.create_task(task.process(records(LINES[20:25], start=20)))
    await turn()
    publisher.gates[2].set()
    await third
    await task.close(graceful=True)  # the final snapshot
    assert [offset for offset, _ in store.written] == [20, 25]
    for offset, data in store.written:
        assert data == committed_prefix(offset)


async def test_a_due_snapshot_with_a_write_in_flight_does_not_stall_the_pipeline(tmp_path: Path) -> None:
    task, publisher, _, store = task_with(tmp_path, every=5)
    store.hold = asyncio.Event()
    await task.process(records(LINES[:10]))
    await turn()
    publisher.gates[0].set()  # 10 committed: the commit's step 5 starts a snapshot, whose write is held
    await turn()
    await task.process(records(LINES[10:20], start=10))
    await turn()
    publisher.gates[1].set()  # 20 committed: due again, but a write is in flight
    await turn()
    await task.process(records(LINES[20:30], start=20))  # its commit stays open
    assert task.snapshots.writing and task.snapshots.due(task.pipeline.next_offset) and task.pipeline.next_offset == 20
    fourth = asyncio.create_task(task.process(records(LINES[30:40], start=30)))
    await turn()
    assert task.pipeline.folded_offset == 40  # folded while 30 commits: no draining for a snapshot it could not take
    store.hold.set()
    publisher.gates[2].set()
    await fourth
    await turn()
    publisher.gates[3].set()
    await task.close(graceful=True)
    assert store.written[0][0] == 10 and store.written[-1][0] == 40
    for offset, data in store.written:
        assert data == committed_prefix(offset)


async def test_incremental_snapshots_hold_exactly_the_committed_prefix_while_the_fold_goes_on(tmp_path: Path) -> None:
    """Deltas on a base (at most 2, then a new base): each restore point is the committed prefix of
    its moment, though the next batches fold while its runs are encoded (copy on write)."""
    task, publisher, _, store = task_with(tmp_path, every=5, max_deltas=2)
    store.keep = 100
    for start in range(0, 60, 5):
        await task.process(records(BLOCKS[start : start + 5], start=start))
        await turn()
        publisher.gates[-1].set()
        if start % 10 == 5:  # a snapshot written, its next one taken while a batch folds
            await task.wait_committed()
            await task.snapshots.wait()
    await task.wait_committed()
    await task.close(graceful=True)
    offsets = [offset for offset, _ in store.written]
    kinds = [b'"format":"ckptlog.snapshot.delta"' in data for _, data in store.written]
    assert offsets == sorted(set(offsets)) and len(offsets) >= 6 and offsets[-1] == 60
    spelt = "".join("d" if delta else "B" for delta in kinds)
    assert spelt.startswith("Bd") and "dB" in spelt  # deltas, and a new base once they weigh half the base
    for offset in offsets:
        assert store.state_at(offset) == committed_prefix(offset, BLOCKS)
