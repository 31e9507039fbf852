"""PartitionTask with a fake publisher, deleter and claim writer: the order of commits, claims, deletions
and snapshots."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from ckptlog.errors import BrokerError, OffsetOutOfRange
from ckptlog.events.codec import decode_event
from ckptlog.events.rejections import Rejection
from ckptlog.kafka.records import OutRecord, PartitionId
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.outputs import Deletion
from ckptlog.processor.core.run_codec import DormantRun
from ckptlog.processor.core.snapshot import decode, encode, of_fold
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.service.harness import workload
from ckptlog.processor.service.observe import _partition_values
from ckptlog.processor.service.partition import PartitionTask, PositionControl, TaskParts, new_task
from ckptlog.processor.service.processor import Processor
from ckptlog.processor.service.records import RecordFactory, TopicNames
from ckptlog.processor.service.restore import Restored, restored_fold
from ckptlog.processor.service.settings import load_settings
from ckptlog.processor.service.snapshotting import SnapshotScheduler
from ckptlog.processor.storage.snapshots import SnapshotStore
from tests import factories as f
from tests.unit.service.test_batch import records

PID = PartitionId("in", 0)
LINES = workload("file:///nowhere/r", runs=2, reports=20, keep=1, validation_share=0.0)


class Publisher:
    def __init__(self) -> None:
        self.commits: list[tuple[list[OutRecord], dict[PartitionId, int]]] = []
        self.fail = False
        self.closed = False

    async def start(self) -> None:
        return None

    async def commit(self, out: Sequence[OutRecord], offsets: dict[PartitionId, int]) -> None:
        await asyncio.sleep(0)
        if self.fail:
            raise BrokerError("in[0]: injected failure")
        self.commits.append((list(out), dict(offsets)))

    async def close(self) -> None:
        self.closed = True


class Storage:
    """The deleter and the claim writer in one fake, handed to a task as both (`TaskParts.deleter` and
    `.claims`), so that `calls` records the order of their effects across the two."""

    def __init__(self) -> None:
        self.submitted: list[tuple[str, str, str]] = []
        self.claimed: list[tuple[str, str]] = []
        self.retired: list[tuple[str, str]] = []  # the retired claims asked for
        self.reopened: list[tuple[str, str]] = []  # the retired claims asked to go (reopened runs)
        self.calls: list[tuple[str, int | None]] = []  # in order: (claimed, retired, reopened or submitted, at)

    def claim_many(
        self,
        claims: Iterable[tuple[str, str]],
        source: str | None = None,
        *,
        retired: bool = False,
        reopened: bool = False,
        at: int | None = None,
    ) -> int:
        claims = list(claims)
        self.calls.append(("retired" if retired else "reopened" if reopened else "claimed", at))
        if retired:
            self.retired += claims
        elif reopened:
            self.reopened += claims
        else:
            self.claimed += claims
        return len(claims)

    def submit_many(self, requests: Iterable[Deletion], source: str | None = None) -> int:
        before = len(self.submitted)
        self.calls.append(("submitted", None))
        self.submitted.extend((r.run_id, r.path, r.root) for r in requests)
        return len(self.submitted) - before


def make_task(
    tmp_path: Path,
    start: int = 0,
    publish_from: int = 0,
    every: int = 10_000,
    fold: Fold | None = None,
    log_end: int = 0,
    consumer: PositionControl | None = None,
) -> tuple[PartitionTask, Publisher, Storage, SnapshotStore]:
    fold = fold or Fold(FoldSettings())
    store = SnapshotStore(str(tmp_path / "snaps"), PID.topic, PID.partition)
    publisher, storage = Publisher(), Storage()
    factory = RecordFactory(TopicNames("in", "c", "v", "w", "s", "d"), PID)
    snapshots = SnapshotScheduler(PID, store, every, 3600, None)
    parts = TaskParts(publisher, factory, snapshots, storage, storage, consumer)
    task = new_task(PID, Restored(fold, start, publish_from, None, log_end), parts)
    if start >= publish_from:
        task.catch_up()
    return task, publisher, storage, store


async def idle(task: PartitionTask) -> None:
    async def position(pid: PartitionId) -> int:
        return task.pipeline.folded_offset

    await task.wait_committed()
    await task.tick(position)


async def test_offsets_commit_with_outputs_and_deletions_follow_the_commit(tmp_path: Path) -> None:
    task, publisher, storage, _ = make_task(tmp_path)
    await task.process(records(LINES[:10]))
    assert not storage.submitted or publisher.commits  # nothing deleted before a commit
    await idle(task)
    out, offsets = publisher.commits[0]
    assert offsets == {PID: 10} and out
    evicted = [o for o in out if o.value and b"checkpoint_evicted" in o.value]
    assert len(storage.submitted) == len(evicted) > 0
    assert task.pipeline.next_offset == 10 and task.pipeline.stats.consumed == 10


async def test_a_failed_commit_breaks_the_task_and_deletes_nothing(tmp_path: Path) -> None:
    task, publisher, storage, _ = make_task(tmp_path)
    publisher.fail = True
    await task.process(records(LINES[:10]))
    await idle(task)
    assert isinstance(task.life.broken, BrokerError) and not storage.submitted and task.pipeline.next_offset == 0
    await task.process(records(LINES[10:12], start=10))
    assert task.pipeline.folded_offset == 10  # a broken task folds nothing more
    await task.close(graceful=True)
    assert publisher.closed


async def test_replay_below_publish_from_publishes_nothing_then_catches_up(tmp_path: Path) -> None:
    task, publisher, _storage, _ = make_task(tmp_path, start=0, publish_from=8)
    await task.process(records(LINES[:12]))
    await idle(task)
    assert task.life.live
    ((out, offsets),) = publisher.commits
    assert offsets == {PID: 12}
    ids = {o.value.split(b'"id":"', 1)[1].split(b'"', 1)[0] for o in out if o.topic == "c"}
    assert all(int(i.split(b":")[3]) >= 8 for i in ids)


async def test_snapshot_every_n_events_and_on_graceful_close(tmp_path: Path) -> None:
    task, _, _, store = make_task(tmp_path, every=5)
    for i in range(0, 15, 5):
        await task.process(records(LINES[i : i + 5], start=i))
    await idle(task)
    await task.snapshots.wait()
    assert store.list_offsets() and max(store.list_offsets()) <= 15
    await task.process(records(LINES[15:17], start=15))
    await task.close(graceful=True)
    assert max(store.list_offsets()) == 17


async def test_completion_records_go_back_to_the_same_input_partition(tmp_path: Path) -> None:
    task, _, _, _ = make_task(tmp_path)
    await task.process(records(LINES[:12]))
    await idle(task)
    evicted = next(iter(task.fold.runs["run-0"].outstanding.values()))
    (record,) = task.deletions_settled([("run-0", evicted.path), ("run-unknown", "file:///x")])
    assert (record.topic, record.partition, record.key) == ("in", 0, b"run-0")
    event = decode_event(record.value, record.key)
    assert not isinstance(event, Rejection)
    assert [(e.checkpoint_path, e.eviction) for e in event.data.deleted] == [(evicted.path, evicted.eviction)]  # type: ignore[union-attr]
    assert task.deletions_settled([("run-0", "file:///nowhere/r/run-0/never-evicted")]) == []
    await task.close(graceful=True)
    assert task.deletions_settled([("run-0", evicted.path)]) == []


async def test_completions_name_each_runs_owed_evictions_whatever_the_keys_order_and_spelling(tmp_path: Path) -> None:
    """Keys of two runs interleaved, a path spelled otherwise than its key, a path confirmed twice, a
    refusal beside confirmations: one completion per run, in the order the runs first settle something,
    each naming the evictions owed, in the order confirmed."""
    task, _, _, _ = make_task(tmp_path)
    await task.process(records(LINES[:12]))
    await idle(task)
    owed = {run: list(task.fold.runs[run].outstanding.values()) for run in ("run-0", "run-1")}
    assert all(len(evicted) >= 2 for evicted in owed.values())
    (a1, a2), (b1, b2) = owed["run-0"][:2], owed["run-1"][:2]
    respelled = a2.path.replace("file:///", "file:////") + "/"  # the same key, parsed to it
    done = [("run-1", b2.path), ("run-0", a1.path), ("run-1", b1.path), ("run-0", respelled), ("run-0", a1.path)]
    records_ = task.deletions_settled(done, [(("run-1", "file:///elsewhere/x"), "not owed"), (("run-0", a2.path), "x")])
    bodies = [decode_event(r.value, r.key) for r in records_]
    got = [(e.subject, [(d.checkpoint_path, d.eviction) for d in e.data.deleted], len(e.data.refused)) for e in bodies]  # type: ignore[union-attr]
    assert got == [
        ("run-1", [(b2.path, b2.eviction), (b1.path, b1.eviction)], 0),
        ("run-0", [(a1.path, a1.eviction), (respelled, a2.eviction), (a1.path, a1.eviction)], 1),
    ]
    await task.close(graceful=True)


async def test_extra_outputs_are_flushed_when_idle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ckptlog.processor.service.partition.IDLE_FLUSH_S", 0.0)
    task, publisher, _, _ = make_task(tmp_path)
    await task.process(records(LINES[:4]))
    await idle(task)
    task.pipeline.extra.append(task.pipeline.factory.checkpoints_missing("run-0", ["file:///x"], 0))
    await idle(task)
    out, offsets = publisher.commits[-1]
    assert offsets == {} and [(o.topic, o.key) for o in out] == [("c", b"run-0")]


async def test_catch_up_resubmits_outstanding_deletions(tmp_path: Path) -> None:
    seed, _, _, _ = make_task(tmp_path)
    await seed.process(records(LINES))
    await idle(seed)
    outstanding = {e.path for run in seed.fold.runs.values() for e in run.outstanding.values()}
    assert outstanding
    task, _, storage, _ = make_task(tmp_path / "again", start=len(LINES), publish_from=len(LINES), fold=seed.fold)
    await idle(task)  # the fold is at the log's end at restore: the re-drive starts
    await asyncio.sleep(0.2)  # resubmission and the existence check run in the background
    assert {p for _, p, *_ in storage.submitted} == outstanding
    await idle(task)
    assert any(
        b"checkpoints_missing" in (o.value or b"")
        for out, _ in task.publisher.commits  # type: ignore
        for o in out
    )


async def test_owed_deletions_are_re_driven_only_once_the_log_read_at_restore_is_folded(tmp_path: Path) -> None:
    """Issue 12 case 4: a restore re-drove its deletion list before folding what the log already
    held, where the path had been settled and reported again: the kept, latest checkpoint was deleted."""
    seed, _, _, _ = make_task(tmp_path)
    await seed.process(records(LINES))
    await idle(seed)
    run = seed.fold.runs["run-0"]
    evicted = next(iter(run.outstanding.values()))
    n = len(LINES)
    later = [  # what the log holds after the snapshot: the deletion settled, the path reported again
        f.settled("run-0", deleted=[(evicted.path, evicted.eviction)], event_id="settled"),
        f.report("run-0", {"score": 99.0}, evicted.path, event_id="again"),
    ]
    task, _, storage, _ = make_task(tmp_path / "again", start=n, publish_from=n, fold=seed.fold, log_end=n + 2)
    await idle(task)
    assert storage.submitted == [], "re-driven before the log read at restore was folded"
    await task.process(records(later, n))
    await idle(task)
    await asyncio.sleep(0.2)
    assert storage.submitted and evicted.path not in {p for _, p, *_ in storage.submitted}
    assert task.fold.runs["run-0"].latest.path == evicted.path  # type: ignore[union-attr]


class Positions:
    """The consumer as a task sees it: seeks it asks for, and where the log starts."""

    def __init__(self, log_start: int = 0) -> None:
        self.start, self.rereads, self.checks = log_start, list[tuple[PartitionId, int]](), list[int]()

    def seek(self, pid: PartitionId, offset: int) -> None:
        self.rereads.append((pid, offset))

    async def log_start(self, pid: PartitionId) -> int:
        self.checks.append(len(self.rereads))
        return self.start


async def test_a_gap_lost_to_retention_breaks_the_task(tmp_path: Path) -> None:
    consumer = Positions(log_start=5)
    task, _publisher, _, _ = make_task(tmp_path, consumer=consumer)
    await task.process(records(LINES[:3]))
    await task.process(records(LINES[5:8], start=5))
    assert consumer.checks and isinstance(task.life.broken, OffsetOutOfRange) and not task.pipeline.usable
    assert "offsets 3..4 were deleted by retention" in str(task.life.broken)


async def test_a_jump_in_offsets_is_re_read_once_before_the_fold_goes_over_it(tmp_path: Path) -> None:
    """A first batch starting past the restored offset is dropped and the partition re-read from
    there: a moved consumer position must never leave records out of the state. Only a jump the
    broker repeats (transaction markers, aborted records) is folded over, after the retention
    check; once the task has folded a batch, its position is its own and jumps are markers."""
    consumer = Positions()
    task, _, _, _ = make_task(tmp_path, start=3, publish_from=3, consumer=consumer)
    await task.process(records(LINES[5:8], start=5))  # a stale position: 3 and 4 would be lost
    assert consumer.rereads == [(PID, 3)] and consumer.checks == [] and task.pipeline.folded_offset == 3
    assert task.pipeline.usable
    await task.process(records(LINES[5:8], start=5))  # the broker repeats it: 3 and 4 are markers
    assert consumer.rereads == [(PID, 3)] and len(consumer.checks) == 1 and task.pipeline.folded_offset == 8
    await task.process(records(LINES[10:12], start=10))  # after a folded batch: markers, no re-read
    assert consumer.rereads == [(PID, 3)] and len(consumer.checks) == 2 and task.pipeline.folded_offset == 12
    again = Positions()
    fresh, _, _, _ = make_task(tmp_path / "fresh", start=3, publish_from=3, consumer=again)
    await fresh.process(records(LINES[5:8], start=5))
    await fresh.process(records(LINES[3:8], start=3))  # re-read from 3: nothing was missing after all
    assert again.rereads == [(PID, 3)] and fresh.pipeline.folded_offset == 8 and fresh.pipeline.stats.consumed == 0
    await idle(fresh)
    assert fresh.pipeline.stats.consumed == 5


async def test_gap_check_tells_markers_from_retention(tmp_path: Path) -> None:
    task, _, _, _ = make_task(tmp_path)
    await task._gap(Positions(log_start=3), 3, 5)  # log start <= expected: markers or aborted records, fine
    with pytest.raises(OffsetOutOfRange, match=r"in\[0\]: offsets 3..3 were deleted.*--allow-data-loss"):
        await task._gap(Positions(log_start=4), 3, 5)
    task._allow_loss = True
    await task._gap(Positions(log_start=4), 3, 5)


class Owner:
    """Stands in for a PartitionTask when routing confirmed deletions."""

    def __init__(self, runs: set[str]) -> None:
        self.runs, self.seen = runs, []  # type: list[list[tuple[str, str]]]

    def owns(self, run_id: str) -> bool:
        return run_id in self.runs

    def deletions_settled(self, done: Sequence[tuple[str, str]]) -> list[OutRecord]:
        self.seen.append(list(done))
        return [OutRecord("in", run.encode(), path.encode()) for run, path in done]


async def test_confirmed_deletions_go_to_the_partition_owning_each_run() -> None:
    processor = Processor(load_settings(None, bootstrap_servers="127.0.0.1:1"))
    first, second = Owner({"a"}), Owner({"b"})
    processor.partitions.assign(PartitionId("in", 0)).task = first  # type: ignore[assignment]
    processor.partitions.assign(PartitionId("in", 1)).task = second  # type: ignore[assignment]
    written: list[OutRecord] = []
    processor.deletions.writer = SimpleNamespace(extend=written.extend)  # type: ignore[assignment]
    processor.deletions.done([("a", "p1"), ("b", "p2"), ("gone", "p3"), ("a", "p4")])
    assert first.seen == [[("a", "p1"), ("a", "p4")]] and second.seen == [[("b", "p2")]]
    assert sorted(r.value for r in written) == [b"p1", b"p2", b"p4"]  # a run no task owns: nothing to write


async def test_a_retirement_asks_for_its_retired_claim_and_a_restore_asks_again_for_every_finished_root(
    tmp_path: Path,
) -> None:
    """Contract §3 *Expiry*: the retired claim keeps a finished run's checkpoints once its record
    expires; it is asked for as the run retires, and again after a restore (one may have been lost
    with the process), while the restore claims only the live runs' roots as live."""
    lines = [f.started("done", "file:///sr/done"), f.finished("done"), f.started("open", "file:///sr/open")]
    seed, _, storage, _ = make_task(tmp_path)
    await seed.process(records(lines))
    await idle(seed)
    assert storage.retired == [("file:///sr/done", "done")]
    task, _, again, _ = make_task(tmp_path / "again", start=len(lines), publish_from=len(lines), fold=seed.fold)
    assert again.retired == [("file:///sr/done", "done")]
    assert again.claimed == [("file:///sr/open", "open")]
    await task.close(graceful=False)


async def test_flagging_missing_checkpoints_after_a_restore_lets_the_loop_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench.many found it: a restore of 100,000 runs whose kept checkpoints were all gone flagged
    them in one go, holding the event loop for 10 s, past the session timeout (the member was dropped
    and the partition restored again). The flags go out in slices (SLICE_S), every run still flagged."""
    monkeypatch.setattr("ckptlog.processor.service.partition.SLICE_S", 0.0)  # a slice per run
    runs = 40
    lines = workload("file:///nowhere/r", runs=runs, reports=2 * runs, keep=1, validation_share=0.0)
    seed, _, _, _ = make_task(tmp_path)
    await seed.process(records(lines))
    await idle(seed)
    n = len(lines)
    task, _, _, _ = make_task(tmp_path / "again", start=n, publish_from=n, fold=seed.fold)
    seen: list[int] = []

    async def watch() -> None:  # another task on the loop: what it sees of the flagging between its turns
        while len(task.pipeline.extra) < runs:
            seen.append(len(task.pipeline.extra))
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    await idle(task)  # caught up: the existence check starts in the background
    await asyncio.wait_for(watcher, timeout=30)
    assert len({count for count in seen if 0 < count < runs}) >= runs // 2, f"flagged in one go: {sorted(set(seen))}"
    assert sorted(o.key or b"" for o in task.pipeline.extra) == sorted(f"run-{r}".encode() for r in range(runs))
    assert all(b"checkpoints_missing" in (o.value or b"") for o in task.pipeline.extra)


async def test_a_restore_to_caught_up_re_driven_and_scraped_builds_no_run(tmp_path: Path) -> None:
    """Contract §6 *dormant runs*: what the processor reads of every run after a restore (the roots it
    claims, the kept paths it checks, the evictions it re-drives, the metrics' counts) comes from the
    entries of runs not built yet, and is what the built runs give."""
    lines = workload(f"file://{tmp_path}/data/r", runs=3, reports=20, keep=1, validation_share=0.0)
    seed, _, _, _ = make_task(tmp_path / "seed")
    await seed.process(records(lines))
    await idle(seed)
    for run in seed.fold.runs.values():  # every kept checkpoint exists: the check flags (and reads) none
        for path in run.kept_paths():
            Path(path.removeprefix("file://")).mkdir(parents=True)
    snap = decode(encode(of_fold(seed.fold, PID.topic, PID.partition, len(lines))))
    fold = restored_fold(snap, snap.settings, track=True)
    n = len(lines)
    task, _, storage, _ = make_task(tmp_path / "again", start=n, publish_from=n, fold=fold)
    await idle(task)
    await asyncio.sleep(0.2)  # the re-drive and the existence check run in the background
    await idle(task)
    values = _partition_values(task, 0.0)
    assert all(type(run) is DormantRun for run in fold.runs.values()), "a run was built"
    owed = {(d.run_id, d.path, d.root) for d in seed.fold.owed()}
    assert owed and set(storage.submitted) == owed
    assert sorted(storage.claimed) == sorted(seed.fold.roots.owners.items())
    kept, pending, outstanding = (
        sum(counts) for counts in zip(*(r.live_counts() for r in seed.fold.runs.values()), strict=True)
    )
    assert (values["ckptlog_kept_checkpoints"], values["ckptlog_outstanding_deletions"]) == (kept, outstanding)
    assert values["ckptlog_pending_validations"] == pending
    assert not any(b"checkpoints_missing" in (o.value or b"") for out, _ in task.publisher.commits for o in out)  # type: ignore[attr-defined]
