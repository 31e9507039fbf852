"""`Processor` driven end to end without a broker: in-memory fakes of its Kafka clients and deleter
(tests/unit/service/fakes.py), real snapshot storage (tmp_path) and the real fold."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ckptlog.events.paths import normalize
from ckptlog.kafka.errors import KafkaIOError
from ckptlog.kafka.records import OutRecord, PartitionId
from ckptlog.processor.foldfile import fold_lines
from ckptlog.processor.service.harness import expected_views, workload
from ckptlog.processor.service.lifecycle import Partition
from ckptlog.processor.service.partition import PartitionTask
from ckptlog.processor.service.processor import Processor
from ckptlog.processor.service.settings import ServiceSettings, load_settings
from ckptlog.processor.storage import claim_writer
from ckptlog.processor.storage.claim_writer import ClaimWriter, claim_all
from ckptlog.processor.storage.deletion import Deleter
from ckptlog.processor.storage.safety import HOLD_S
from ckptlog.processor.storage.snapshots import SnapshotStore
from tests.unit.service.fakes import FakeClaims, FakeConsumer, FakeDeleter, FakeKafka, FakeTransactional

INPUT = "ckptlog.events"
P0, P1 = PartitionId(INPUT, 0), PartitionId(INPUT, 1)
LINES = workload("file:///nowhere/r", runs=6, reports=300, keep=1, validation_share=0.2, seed=3)


def settings(tmp_path: Path, **overrides: Any) -> ServiceSettings:
    return load_settings(
        None,
        bootstrap_servers="unused:9092",
        snapshots=(tmp_path / "snaps").as_uri(),
        storage_root="file:///nowhere",
        topic_partitions=2,
        snapshot_every=40,
        max_batch_records=25,
        poll_timeout_ms=5,
        **overrides,
    )


def partition_of(line: bytes) -> int:
    return zlib.crc32(json.loads(line)["subject"].encode()) % 2


def produce(kafka: FakeKafka, lines: list[bytes]) -> None:
    kafka.logs.setdefault(INPUT, [[], []])
    kafka.append(OutRecord(INPUT, json.loads(line)["subject"].encode(), line) for line in lines)


def views(kafka: FakeKafka) -> dict[str, Any]:
    latest: dict[str, Any] = {}
    for log in kafka.logs["ckptlog.state"]:
        for record in log:
            latest[(record.key or b"").decode()] = json.loads(record.value or b"null")
    return dict(sorted(latest.items()))


async def until(condition: Callable[[], bool], run: asyncio.Task[None], timeout: float = 20.0) -> None:
    """Wait for `condition`; it must then still hold a moment later (completions flow back meanwhile)."""
    deadline = asyncio.get_running_loop().time() + timeout
    held = 0
    while held < 3:
        if run.done():
            run.result()
            raise AssertionError("the processor stopped")
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        held = held + 1 if condition() else 0
        await asyncio.sleep(0.05)


def settled(kafka: FakeKafka, processor: Processor) -> Callable[[], bool]:
    def check() -> bool:  # not before the partitions are restored: under load that takes a while
        return (
            bool(processor.assignment)
            and all(kafka.committed.get(pid) == kafka.end(pid) for pid in processor.assignment)
            and all(t.pipeline.usable and not t.pipeline.in_flight for t in processor.tasks.values())
        )

    return check


async def started(config: ServiceSettings, kafka: FakeKafka) -> tuple[Processor, asyncio.Task[None]]:
    """A processor on `kafka` with a fake deleter, running until its partitions are settled."""
    processor = Processor(
        config, clients=kafka, deleter_factory=lambda **kw: FakeDeleter(kafka, kw["on_done"]), claims_factory=FakeClaims
    )
    run = asyncio.create_task(processor.run())
    await until(settled(kafka, processor), run)
    return processor, run


def snapshots(tmp_path: Path, pid: PartitionId) -> list[int]:
    return SnapshotStore((tmp_path / "snaps").as_uri(), pid.topic, pid.partition).list_offsets()


async def test_assign_fold_commit_fail_rebuild_fence_rejoin_revoke_stop(tmp_path: Path) -> None:
    kafka, deleters = FakeKafka(), []

    def deleter(**kwargs: Any) -> FakeDeleter:
        deleters.append(FakeDeleter(kafka, kwargs["on_done"]))
        return deleters[-1]

    config = settings(tmp_path)
    first, second, third = LINES[:220], LINES[220:300], LINES[300:]
    assert {partition_of(line) for line in third} == {0, 1}
    produce(kafka, first)
    processor = Processor(config, clients=kafka, deleter_factory=deleter, claims_factory=FakeClaims)
    run = asyncio.create_task(processor.run())
    await asyncio.wait_for(processor.ready.wait(), 5)
    assert processor.assignment == [P0, P1]

    # assignment -> restore -> batches folded and committed, in order
    await until(settled(kafka, processor), run)
    assert views(kafka) == expected_views(first, config)
    for pid in (P0, P1):
        offsets = [o for p, o in kafka.commits if p == pid and o is not None]
        assert offsets == sorted(set(offsets)) and offsets[-1] == kafka.end(pid)
        assert snapshots(tmp_path, pid) and set(snapshots(tmp_path, pid)) <= set(offsets)  # committed states only
    (deletions,) = deleters
    assert deletions.submitted and not deletions.premature  # handed over only once durable
    assert any(v.get("type") == "ckptlog.deletion_completed.v3" for v in kafka.values(INPUT))  # folded back

    # a failed commit: the task breaks, nothing of that batch is deleted, the partition is rebuilt
    kafka.fail_commits[P0] = 1
    produce(kafka, second)
    await until(lambda: processor.rebuilds == 1 and settled(kafka, processor)(), run)
    assert views(kafka) == expected_views(first + second, config)
    assert not deletions.premature and processor.rejoins == 0

    # fenced: another instance's producer took P1's transactional id -> drop every task, rejoin, restore
    kafka.epochs[P1] += 1
    produce(kafka, third)
    await until(lambda: processor.rejoins == 1 and settled(kafka, processor)(), run)
    assert processor.assignment == [P0, P1] and views(kafka) == expected_views(LINES, config)
    assert not deletions.premature

    # revocation: P1 goes to another instance -> its task closes with a final snapshot
    kafka.assignable = [P0]
    kafka.consumers[0].rejoin()
    await until(lambda: processor.assignment == [P0] and settled(kafka, processor)(), run)
    assert snapshots(tmp_path, P1)[-1] == kafka.committed[P1]

    # stop: commit, final snapshot, every client stopped
    processor.stop()
    await asyncio.wait_for(run, 5)
    assert snapshots(tmp_path, P0)[-1] == kafka.committed[P0] == kafka.end(P0)
    assert all(p.stopped for p in kafka.producers) and kafka.consumers[0].stopped and deletions.closed
    assert processor.stats().consumed > len(LINES)  # the events plus the completions written back


async def test_at_least_once_publishes_then_commits_and_a_restart_resumes_from_the_snapshot(tmp_path: Path) -> None:
    kafka = FakeKafka()
    config = settings(tmp_path, guarantee="at_least_once")
    produce(kafka, LINES[:120])
    processor, run = await started(config, kafka)
    assert views(kafka) == expected_views(LINES[:120], config) and not kafka.commits  # no transactions
    processor.stop()
    await run
    published = sum(len(log) for log in kafka.logs["ckptlog.checkpoints"])

    produce(kafka, LINES[120:])
    again = Processor(
        config, clients=kafka, deleter_factory=lambda **kw: FakeDeleter(kafka, kw["on_done"]), claims_factory=FakeClaims
    )
    run = asyncio.create_task(again.run())
    await until(settled(kafka, again), run)
    assert views(kafka) == expected_views(LINES, config)
    ids = [v["id"] for v in kafka.values("ckptlog.checkpoints") if str(v["id"]).count(":") == 4]
    assert len(ids) == len(set(ids))  # resumed after the snapshot and the committed offsets: nothing twice
    assert sum(len(log) for log in kafka.logs["ckptlog.checkpoints"]) > published
    again.stop()
    await run


async def test_a_partition_restored_beside_a_slower_one_replays_before_it_goes_live(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """CI found it (the crash matrix flagged checkpoints_missing after a restore): with the
    rebalance in the coordinator's task, as aiokafka runs it, P0's task was ticked while P1 still
    restored and before P0 was seeked; the consumer stood at the group's committed offset, the
    tick took that for the end of the replay, and P0 went live on the snapshot's state. Its kept
    check then ran on that state (a false alarm for checkpoints evicted since), and with nothing
    left to commit it re-drove the snapshot's owed deletions before the replay could show a path
    reported again since (contract §9): a kept checkpoint deleted."""
    import ckptlog.processor.service.tasks as tasks

    kafka, config = FakeKafka(), settings(tmp_path)
    produce(kafka, LINES[:200])
    processor, run = await started(config, kafka)
    processor.stop()
    await run
    shutil.rmtree(tmp_path / "snaps")  # both partitions replay their whole log
    published = kafka.values("ckptlog.checkpoints")
    ends = {pid: kafka.end(pid) for pid in (P0, P1)}  # the deletions re-driven later append completions
    real_restore = tasks.restore

    async def slow_for_p1(pid: PartitionId, *args: Any) -> Any:
        restored = await real_restore(pid, *args)
        if pid == P1:
            await asyncio.sleep(0.3)  # P0's task exists meanwhile; the poll loop ticks it
        return restored

    monkeypatch.setattr(tasks, "restore", slow_for_p1)
    went_live: list[tuple[PartitionId, int, int]] = []  # (pid, folded offset, offset published up to)
    real_catch_up = PartitionTask.catch_up

    def catch_up(task: PartitionTask) -> None:
        went_live.append((task.pid, task.pipeline.folded_offset, task.pipeline.publish_from))
        real_catch_up(task)

    monkeypatch.setattr(PartitionTask, "catch_up", catch_up)
    again = Processor(
        config, clients=kafka, deleter_factory=lambda **kw: FakeDeleter(kafka, kw["on_done"]), claims_factory=FakeClaims
    )
    kafka.consumer_background = True
    run = asyncio.create_task(again.run())

    def replayed() -> bool:
        tasks = again.tasks
        return len(tasks) == 2 and all(
            t.life.live and t.pipeline.folded_offset == kafka.end(p) for p, t in tasks.items()
        )

    await until(lambda: replayed() and settled(kafka, again)(), run)
    assert kafka.consumers[-1].background
    # live only once the fold has read what the earlier owner published (no transaction markers here)
    assert sorted(went_live) == [(P0, ends[P0], ends[P0]), (P1, ends[P1], ends[P1])]
    fresh = fold_lines([line for line in LINES[:200] if partition_of(line) == 0]).fold
    assert sorted(again.tasks[P0].fold.runs) == sorted(fresh.runs)
    before = [v["id"] for v in published]
    new = [v["id"] for v in kafka.values("ckptlog.checkpoints")]
    for known in before:  # what the first processor published is there once
        new.remove(known)
    for event_id in new:  # the rest: outputs of records the first processor never read, or of its restore
        _, topic, partition, offset, _ = str(event_id).split(":")  # a restore's output: restored@{offset}
        assert int(offset.removeprefix("restored@")) >= ends[PartitionId(topic, int(partition))], event_id
    again.stop()
    await run


async def test_a_restore_finishing_between_a_revocation_and_the_next_assignment_is_dropped(
    tmp_path: Path, caplog: Any
) -> None:
    """A rebuild racing a rebalance (seen on a broker restart, at_least_once): the restore finishes after
    the revocation, before the next assignment. Its seek lands on the outgoing assignment and the next
    one starts at the committed offset; kept, the task would fold on from there over everything
    between its snapshot and that offset. It is dropped, and the assignment restores the partition."""
    kafka = FakeKafka()
    config = settings(tmp_path, guarantee="at_least_once")
    produce(kafka, LINES[:150])
    processor, run = await started(config, kafka)
    (consumer,) = kafka.consumers

    async def rebuild_in_the_window() -> None:
        shutil.rmtree(tmp_path / "snaps")  # no snapshot: the restore starts at 0, far behind the committed offset
        assert kafka.committed[P0] > 0 and not snapshots(tmp_path, P0)
        assert P0 not in processor.partitions  # revoked: a rebuild begun before is of the last epoch
        await processor.driver.restore([Partition(P0, processor.partitions.epoch - 1)])
        consumer.between = None

    consumer.between = rebuild_in_the_window
    with caplog.at_level(logging.INFO, logger="ckptlog.processor.service.processor"):
        consumer.rejoin()
        produce(kafka, LINES[150:])
        await until(lambda: consumer.between is None and settled(kafka, processor)(), run)
    assert "event=restore_dropped partition=ckptlog.events[0] reason=a rebalance overtook the restore" in caplog.text
    assert processor.metrics.registry.get_sample_value("ckptlog_restores_dropped_total") == 1  # type: ignore[attr-defined]
    assert views(kafka) == expected_views(LINES, config)
    assert processor.tasks[P0].pipeline.folded_offset == kafka.end(P0)
    processor.stop()
    await run


async def test_a_transient_error_while_restoring_one_partition_is_retried_while_the_other_goes_on(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Issue 13 case 8: a Kafka or storage error during a restore stopped the whole processor."""
    from ckptlog.kafka.errors import KafkaIOError
    from tests.unit.service.fakes import FakeConsumer

    kafka = FakeKafka()
    produce(kafka, LINES[:120])
    failures = {"left": 3}
    real_committed = FakeConsumer.committed

    async def flaky_committed(self: FakeConsumer, pid: PartitionId) -> int | None:
        if pid == P1 and failures["left"]:
            failures["left"] -= 1
            raise KafkaIOError(f"{pid}: reading the committed offset failed: injected; retry")
        return await real_committed(self, pid)

    monkeypatch.setattr(FakeConsumer, "committed", flaky_committed)
    monkeypatch.setattr("ckptlog.processor.service.lifecycle.RETRY_FIRST_S", 0.01)
    config = settings(tmp_path)
    processor = Processor(
        config, clients=kafka, deleter_factory=lambda **kw: FakeDeleter(kafka, kw["on_done"]), claims_factory=FakeClaims
    )
    run = asyncio.create_task(processor.run())
    await until(lambda: processor.assignment == [P0, P1] and settled(kafka, processor)(), run)
    assert failures["left"] == 0 and views(kafka) == expected_views(LINES[:120], config)
    processor.stop()
    await run


async def test_a_fault_while_writing_an_events_outputs_dead_letters_it_and_leaves_the_state(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Issue 13 case 1 (beyond the fold): an exception after an event was applied, while its outputs
    were written, once snapshotted a half-applied state. Now the event is rolled back and
    dead-lettered (internal_error), and the processor goes on as if it had never been read."""
    from ckptlog.events.envelope import EnvelopeBuilder
    from ckptlog.processor.service.records import H_CLASS, H_REASON

    kafka = FakeKafka()
    lines = LINES[:120]
    poison = [line for line in lines if partition_of(line) == 0][20]  # offset 20 of partition 0
    subject = json.loads(poison)["subject"]
    produce(kafka, lines)

    real_outputs = EnvelopeBuilder.outputs

    def faulty(self: EnvelopeBuilder, run_id: str, offset: int, outputs: Any, into: Any, first: int = 0) -> None:
        if offset == 20 and run_id == subject:
            into.append(OutRecord("half", b"k", b"written before the fault"))
            raise RuntimeError("injected while writing outputs")
        real_outputs(self, run_id, offset, outputs, into, first)

    monkeypatch.setattr(EnvelopeBuilder, "outputs", faulty)
    config = settings(tmp_path)
    processor, run = await started(config, kafka)
    assert views(kafka) == expected_views([line for line in lines if line is not poison], config)
    (dead,) = [record for log in kafka.logs["ckptlog.dlq"] for record in log]
    headers = dict(dead.headers or ())
    assert dead.value == poison and headers[H_REASON] == b"internal_error" and headers[H_CLASS] == b"RuntimeError"
    assert "half" not in kafka.logs
    processor.stop()
    await run


async def test_a_graceful_stop_deletes_what_the_last_batch_evicted(tmp_path: Path, monkeypatch: Any) -> None:
    """SIGTERM while a batch's commit is in flight: its evictions are deleted (real Deleter, with its
    re-check) and confirmed before the partitions close, not dropped as "not owned any more" and
    left owed to the next start (found by the crash matrix's logs)."""
    slow = FakeTransactional.commit

    async def commit(self: FakeTransactional, records: Any, offsets: Any) -> None:
        await asyncio.sleep(0.3 if kafka.slow else 0)
        await slow(self, records, offsets)

    monkeypatch.setattr(FakeTransactional, "commit", commit)
    kafka = FakeKafka()
    kafka.slow = False  # type: ignore[attr-defined]
    produce(kafka, LINES[:100])
    processor = Processor(settings(tmp_path))  # the real Deleter: file:///nowhere is gone, so deleting "works"
    processor._clients = kafka
    run = asyncio.create_task(processor.run())
    await until(settled(kafka, processor), run)
    kafka.slow = True  # type: ignore[attr-defined]
    produce(kafka, LINES[100:140])
    await until(lambda: any(t.pipeline.in_flight for t in processor.tasks.values()), run, timeout=5)
    processor.stop()
    await run
    log = [record.value for part in kafka.logs[INPUT] for record in part if record.value]
    assert fold_lines(log, settings(tmp_path).fold_settings()).fold.owed() == []


async def test_the_processors_deleter_waits_for_the_retired_claims_of_the_processors_claim_writer(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The two storage ports are built apart (claims_factory, deleter_factory: the real ClaimWriter
    and Deleter) and wired by the processor (contract §9, check 2): while the claim writer is still
    writing a retired claim, a deletion in that root is held, not carried out nor dropped by the
    later re-check; once written, nothing was deleted. Were the deleter not asking this writer, the
    re-check (run `a` is in no fold) would have dropped it at once."""
    sr = tmp_path / "sr"
    (sr / "a" / "c0").mkdir(parents=True)
    (sr / "a" / "c0" / "model.bin").write_bytes(b"kept for good")
    outer = normalize(sr.as_uri())
    root, ckpt = f"{outer}/a", f"{outer}/a/c0"
    writing, release = threading.Event(), threading.Event()

    def blocked(claims: Any, outer_root: str | None, options: Any, **kw: Any) -> Any:
        if any(claimant.retired for _, claimant in claims):
            writing.set()
            assert release.wait(timeout=30), "the test never released the retired claim's write"
        return claim_all(claims, outer_root, options, **kw)

    monkeypatch.setattr(claim_writer, "claim_all", blocked)
    kafka = FakeKafka()
    produce(kafka, [])
    config = load_settings(
        None, bootstrap_servers="unused:9092", snapshots=(tmp_path / "snaps").as_uri(), storage_root=outer
    )
    processor = Processor(config, clients=kafka)
    run = asyncio.create_task(processor.run())
    try:
        await asyncio.wait_for(processor.ready.wait(), 5)
        claims, deleter = processor.claims, processor.deleter
        assert isinstance(claims, ClaimWriter) and isinstance(deleter, Deleter)
        claims.claim_many([(root, "a")], f"{INPUT}[0]", retired=True)
        await until(writing.is_set, run, timeout=10)
        assert deleter.submit("a", ckpt, root, f"{INPUT}[0]")
        await asyncio.sleep(5 * HOLD_S)  # several looks of check 2
        assert ("a", ckpt) in deleter.outstanding and deleter.counts.dropped == 0 and not deleter.refused
        assert (sr / "a" / "c0" / "model.bin").exists() and claims.held
    finally:
        release.set()
    assert await deleter.drain(timeout=10) and not claims.held
    assert (sr / "a" / "c0" / "model.bin").read_bytes() == b"kept for good"
    assert deleter.counts.deleted == 0 and deleter.counts.dropped + deleter.counts.refused == 1
    processor.stop()
    await run


async def test_a_restore_a_rebalance_overtook_leaves_the_retry_of_the_next_one_alone(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A rebuild's slow restore of P0 is overtaken by a rebalance whose own restore of P0 fails
    transiently (scheduled for a retry). The rebuild's restore finishes first (restores run one
    after the other, restore_jobs.py); its outcome is void: it must neither register a task nor
    cancel the retry of the assignment's (found by review: the partition stayed assigned and
    paused, with no task and no retry, until the next rebalance)."""
    monkeypatch.setattr("ckptlog.processor.service.lifecycle.RETRY_FIRST_S", 0.01)
    kafka = FakeKafka()
    produce(kafka, LINES[:150])
    gate, blocked = asyncio.Event(), asyncio.Event()
    state = {"slow": False, "fail": False}
    real = FakeConsumer.committed

    async def committed(self: FakeConsumer, pid: PartitionId) -> int | None:
        if pid == P0 and state["slow"]:
            state["slow"] = False
            blocked.set()
            await gate.wait()  # the rebuild's restore waits on a broker coming back
        elif pid == P0 and state["fail"]:
            state["fail"] = False
            raise KafkaIOError("injected: committed offset unavailable")
        return await real(self, pid)

    monkeypatch.setattr(FakeConsumer, "committed", committed)
    config = settings(tmp_path)
    processor, run = await started(config, kafka)
    (consumer,) = kafka.consumers
    state["slow"] = True
    kafka.fail_commits[P0] = 1
    produce(kafka, LINES[150:220])
    await asyncio.wait_for(blocked.wait(), 5)  # the rebuild's restore of P0 is in flight (a background job)
    state["fail"] = True
    await processor.driver.partitions_revoked(list(consumer.assigned))  # what aiokafka's coordinator does meanwhile
    consumer.positions = {pid: kafka.committed.get(pid, 0) for pid in consumer.assigned}
    consumer.paused.clear()
    await processor.driver.partitions_assigned(list(consumer.assigned))  # restores in the background
    assigned = processor.partitions.get(P0)
    gate.set()
    await until(lambda: not state["fail"], run)  # the assignment's restore of P0 ran and failed...
    assert assigned is not None and processor.partitions.get(P0) is assigned
    produce(kafka, LINES[220:])
    await until(lambda: P0 in processor.tasks and settled(kafka, processor)(), run)  # ...and was retried
    assert processor.tasks[P0].life is assigned  # the void restore registered no task of its own
    assert processor.metrics.registry.get_sample_value("ckptlog_restores_dropped_total") == 1  # type: ignore[attr-defined]
    assert views(kafka) == expected_views(LINES, config)
    processor.stop()
    await run
