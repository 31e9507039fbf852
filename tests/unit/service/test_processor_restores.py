"""Restores run beside the poll loop, not inside the assignment callback (aiokafka sends no heartbeats
while that runs: a restore longer than the session timeout lost the partitions and restored them
again, in a loop). A slow restore must not hold the callback; the partitions stay paused until their
seek; a rebalance or a stop during it voids it; a fatal error still stops the processor. Retries and
rebuilds run beside the loop too: a slow one must not stall the other partitions' batches."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ckptlog.errors import CkptlogError
from ckptlog.kafka.errors import KafkaIOError
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.service.harness import expected_views
from ckptlog.processor.service.lifecycle import Phase
from ckptlog.processor.service.processor import Processor
from tests.unit.service.fakes import FakeClaims, FakeConsumer, FakeDeleter, FakeKafka, FakeTransactional
from tests.unit.service.test_processor import LINES, P0, P1, produce, settings, settled, started, until, views


class SlowCommitted:
    """Makes the next restore of P0 wait on `gate` (or raise `error`) where it reads the committed offset."""

    def __init__(self, monkeypatch: Any, error: BaseException | None = None) -> None:
        self.gate, self.blocked, self.armed, self.error = asyncio.Event(), asyncio.Event(), True, error
        real = FakeConsumer.committed

        async def committed(consumer: FakeConsumer, pid: Any) -> int | None:
            if pid == P0 and self.armed:
                self.armed = False
                self.blocked.set()
                if self.error is not None:
                    raise self.error
                await self.gate.wait()
            return await real(consumer, pid)

        monkeypatch.setattr(FakeConsumer, "committed", committed)


def processor_on(kafka: FakeKafka, tmp_path: Path) -> tuple[Processor, asyncio.Task[None]]:
    processor = Processor(
        settings(tmp_path),
        clients=kafka,
        deleter_factory=lambda **kw: FakeDeleter(kafka, kw["on_done"]),
        claims_factory=FakeClaims,
    )
    return processor, asyncio.create_task(processor.run())


def open_producers(kafka: FakeKafka) -> list[FakeTransactional]:
    return [p for p in kafka.producers if isinstance(p, FakeTransactional) and not p.stopped]


def opened_by_partition(kafka: FakeKafka) -> Counter[PartitionId]:
    """Transactional producers ever started, per partition."""
    return Counter(p.pid for p in kafka.producers if isinstance(p, FakeTransactional))


async def released_whole_and_stopped(
    gate: asyncio.Event, kafka: FakeKafka, processor: Processor, run: asyncio.Task[None], tmp_path: Path
) -> None:
    """Let the held restore go on: once settled both partitions are ours and every VIEW is whole; the
    stop then closes every producer."""
    gate.set()
    await until(settled(kafka, processor), run)
    assert processor.assignment == [P0, P1] and views(kafka) == expected_views(LINES, settings(tmp_path))
    processor.stop()
    await run
    assert not open_producers(kafka)


async def test_a_slow_restore_does_not_hold_the_callback_and_a_revocation_voids_it(
    tmp_path: Path, monkeypatch: Any, caplog: pytest.LogCaptureFixture
) -> None:
    kafka = FakeKafka()
    produce(kafka, LINES[:150])
    slow = SlowCommitted(monkeypatch)
    processor, run = processor_on(kafka, tmp_path)
    await asyncio.wait_for(slow.blocked.wait(), 5)
    (consumer,) = kafka.consumers
    polled = processor.last_poll
    await until(lambda: processor.last_poll > polled, run)  # the callback returned: the loop polls on
    restoring = processor.partitions.get(P0)
    assert restoring is not None and restoring.phase is Phase.RESTORING and not processor.tasks
    assert {P0, P1} <= consumer.paused and not processor.ready.is_set()  # nothing fetched before the seek

    kafka.assignable = [P1]  # the group moves P0 elsewhere while its restore is in flight
    consumer.rebalance = True
    await until(lambda: processor.assigned == {P1} and restoring.phase is Phase.CLOSED, run)
    assert not processor.ready.is_set()  # the new assignment's restore waits for the void one
    with caplog.at_level(logging.INFO, "ckptlog.processor.service.processor"):
        slow.gate.set()
        await until(settled(kafka, processor), run)
    assert processor.ready.is_set() and processor.assignment == [P1]
    assert P0 not in consumer.positions  # the void restore never seeked a partition no longer ours
    assert "event=restore_dropped partition=ckptlog.events[0]" in caplog.text
    assert [p.pid for p in open_producers(kafka)] == [P1]  # every void restore's producer closed
    assert processor.rebuilds == 0 and restoring.task is None
    processor.stop()
    await run
    assert not open_producers(kafka)


async def test_a_stop_during_a_background_restore_drops_it(tmp_path: Path, monkeypatch: Any) -> None:
    kafka = FakeKafka()
    produce(kafka, LINES[:150])
    slow = SlowCommitted(monkeypatch)
    processor, run = processor_on(kafka, tmp_path)
    await asyncio.wait_for(slow.blocked.wait(), 5)
    processor.stop()
    await asyncio.sleep(0.05)
    assert not run.done()  # the shutdown waits for the restore in flight
    slow.gate.set()
    await asyncio.wait_for(run, 5)
    assert not processor.tasks and not open_producers(kafka) and not kafka.commits


async def test_a_fatal_background_restore_error_stops_the_processor(tmp_path: Path, monkeypatch: Any) -> None:
    kafka = FakeKafka()
    produce(kafka, LINES[:150])
    SlowCommitted(monkeypatch, error=RuntimeError("injected: a bug in the restore"))
    processor, run = processor_on(kafka, tmp_path)
    with pytest.raises(CkptlogError, match=r"ckptlog.events\[0\]: unexpected error while restoring"):
        await asyncio.wait_for(run, 5)
    assert not processor.tasks and not open_producers(kafka)


async def test_a_rebalance_that_keeps_the_partitions_restores_them_after_the_void_restore(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Eager rebalance: everything revoked and assigned again while P0 restores. The new restore runs
    only after the void one (two at once would fence each other's producer), and the fold is whole."""
    kafka = FakeKafka()
    produce(kafka, LINES[:150])
    slow = SlowCommitted(monkeypatch)
    processor, run = processor_on(kafka, tmp_path)
    await asyncio.wait_for(slow.blocked.wait(), 5)
    first = processor.partitions.get(P0)
    kafka.consumers[0].rebalance = True
    await until(lambda: processor.partitions.get(P0) is not first, run)
    produce(kafka, LINES[150:])
    await released_whole_and_stopped(slow.gate, kafka, processor, run, tmp_path)
    assert not kafka.fail_commits


class ScriptedCommitted:
    """P0's reads of its committed offset follow `steps` while any are left: "fail" raises a transient
    Kafka error, "block" waits on `gate` (slow storage or broker); then the real read."""

    def __init__(self, monkeypatch: Any, steps: list[str]) -> None:
        self.steps, self.gate, self.blocked = steps, asyncio.Event(), asyncio.Event()
        real = FakeConsumer.committed

        async def committed(consumer: FakeConsumer, pid: Any) -> int | None:
            if pid == P0 and self.steps:
                if self.steps.pop(0) == "fail":
                    raise KafkaIOError(f"{pid}: reading the committed offset failed: injected; retry")
                self.blocked.set()
                await self.gate.wait()
            return await real(consumer, pid)

        monkeypatch.setattr(FakeConsumer, "committed", committed)


def caught_up(kafka: FakeKafka, processor: Processor, pid: Any) -> Callable[[], bool]:
    """`pid`'s task folded and committed everything its log holds."""

    def check() -> bool:
        task = processor.tasks.get(pid)
        end = kafka.end(pid)
        return task is not None and task.pipeline.folded_offset == end and kafka.committed.get(pid) == end

    return check


async def test_a_slow_retried_restore_does_not_stall_the_other_partitions_batches(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Issue 39: the retry of a restore that failed for a transient reason ran inside the poll loop,
    so while it was slow no other partition's batch was folded or committed. It runs beside the
    loop now, like an assignment's restore, with its partition paused until its seek."""
    monkeypatch.setattr("ckptlog.processor.service.lifecycle.RETRY_FIRST_S", 0.01)
    kafka = FakeKafka()
    produce(kafka, LINES[:150])
    script = ScriptedCommitted(monkeypatch, ["fail", "block"])
    processor, run = processor_on(kafka, tmp_path)
    await asyncio.wait_for(script.blocked.wait(), 5)  # the assignment's restore of P0 failed; its retry hangs
    (consumer,) = kafka.consumers
    produce(kafka, LINES[150:])  # live batches for both partitions
    await until(caught_up(kafka, processor, P1), run, timeout=5)  # P1 goes on meanwhile
    retrying = processor.partitions.get(P0)
    assert retrying is not None and retrying.phase is Phase.RESTORING and retrying.attempts == 1
    assert P0 in consumer.paused and P0 not in processor.tasks and kafka.committed.get(P0, 0) < kafka.end(P0)
    await released_whole_and_stopped(script.gate, kafka, processor, run, tmp_path)


async def test_a_slow_rebuild_does_not_stall_the_other_partitions_batches(tmp_path: Path, monkeypatch: Any) -> None:
    """Issue 39: a partition whose commit failed was restored again inside the poll loop; while that
    restore was slow, no other partition's batch was folded or committed. The rebuild runs beside
    the loop now: the broken task closed and the partition restored in a background job."""
    kafka = FakeKafka()
    produce(kafka, LINES[:150])
    processor, run = await started(settings(tmp_path), kafka)
    (consumer,) = kafka.consumers
    script = ScriptedCommitted(monkeypatch, ["block"])
    kafka.fail_commits[P0] = 1
    produce(kafka, LINES[150:220])
    await asyncio.wait_for(script.blocked.wait(), 5)  # P0's commit failed; its rebuild's restore hangs
    produce(kafka, LINES[220:])
    await until(caught_up(kafka, processor, P1), run, timeout=5)  # P1 goes on meanwhile
    rebuilding = processor.partitions.get(P0)
    assert rebuilding is not None and rebuilding.phase is Phase.RESTORING and processor.rebuilds == 1
    assert P0 in consumer.paused and P0 not in processor.tasks
    await released_whole_and_stopped(script.gate, kafka, processor, run, tmp_path)


async def test_a_queued_restore_whose_partitions_were_revoked_before_it_ran_opens_no_producer(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Restores run one after the other: an assignment's job queued behind a slow one may find its
    partitions revoked by a later rebalance before it begins. It must open nothing: under exactly_once
    opening starts the partition's transactional producer, which fences the new owner's."""
    kafka = FakeKafka()
    produce(kafka, LINES[:150])
    slow = SlowCommitted(monkeypatch)
    processor, run = processor_on(kafka, tmp_path)
    await asyncio.wait_for(slow.blocked.wait(), 5)  # the first job: P0 (blocked) and P1
    (consumer,) = kafka.consumers
    first = processor.partitions.get(P0)
    consumer.rebalance = True  # a second job queued behind the first, for P0 and P1 again
    await until(lambda: processor.partitions.get(P0) is not first, run)
    second = processor.partitions.get(P0)
    kafka.assignable = [P0]  # and before it runs, P1 goes elsewhere: the second job's partitions are void
    consumer.rebalance = True
    await until(lambda: processor.partitions.get(P0) is not second and P1 not in processor.partitions, run)
    opened_before = opened_by_partition(kafka)
    slow.gate.set()
    await until(settled(kafka, processor), run)
    opened = opened_by_partition(kafka)
    assert opened[P1] == opened_before[P1]  # the second job opened nothing for P1 (no longer ours)
    assert opened[P0] == opened_before[P0] + 1  # only the third job, the current assignment's
    assert processor.assignment == [P0] and [p.pid for p in open_producers(kafka)] == [P0]
    processor.stop()
    await run
    assert not open_producers(kafka)
