"""A partition's lifecycle (ckptlog/processor/service/lifecycle.py): each transition on its own, with a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from ckptlog.errors import BrokerError, StorageError
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.service.errors import TooManyRebuilds
from ckptlog.processor.service.lifecycle import (
    MAX_REBUILDS,
    REBUILD_WINDOW_S,
    RETRY_FIRST_S,
    RETRY_MAX_S,
    LifecycleError,
    Partition,
    Partitions,
    Phase,
)

PID = PartitionId("in", 0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


TASK: Any = object()  # the lifecycle only holds its task


def live(clock: Clock | None = None) -> Partition:
    partition = Partition(PID, 0, clock=clock or Clock())
    partition.restored(TASK)
    partition.caught_up()
    return partition


def test_restored_replays_then_catches_up() -> None:
    partition = Partition(PID, 0)
    assert partition.phase is Phase.RESTORING and not partition.usable and partition.task is None
    partition.restored(TASK)
    assert partition.phase is Phase.REPLAYING and partition.usable and not partition.live and partition.task is TASK
    partition.caught_up()
    assert partition.phase is Phase.LIVE and partition.live


def test_a_failed_restore_backs_off_doubling_up_to_the_cap() -> None:
    clock = Clock()
    partition = Partition(PID, 0, clock=clock)
    delays = []
    for _ in range(10):
        delays.append(partition.restore_failed(StorageError("down")))
        assert partition.phase is Phase.RETRYING and not partition.due()
        clock.now += delays[-1]
        assert partition.due()
        partition.retry(epoch=3)
        assert partition.phase is Phase.RESTORING and partition.epoch == 3
    assert delays[:3] == [RETRY_FIRST_S, 2 * RETRY_FIRST_S, 4 * RETRY_FIRST_S] and delays[-1] == RETRY_MAX_S
    partition.restored(TASK)
    assert partition.attempts == 0 and partition.error is None


def test_broken_keeps_the_first_error_and_rebuilds_until_too_many() -> None:
    clock = Clock()
    partition = live(clock)
    for _ in range(MAX_REBUILDS):
        partition.broke(BrokerError("first"))
        partition.broke(BrokerError("second"))  # a failure while broken keeps the first one
        assert partition.phase is Phase.BROKEN and str(partition.broken) == "first"
        assert partition.rebuild(epoch=1) is TASK and partition.phase is Phase.RESTORING and partition.task is None
        partition.restored(TASK)
        clock.now += 1
    partition.broke(BrokerError("again"))
    with pytest.raises(TooManyRebuilds, match=rf"in\[0\] failed {MAX_REBUILDS + 1} times.*again"):
        partition.rebuild(epoch=1)
    clock.now += REBUILD_WINDOW_S  # the window slides: old rebuilds no longer count
    assert partition.rebuild(epoch=2) is TASK


def test_closing_keeps_why_it_broke() -> None:
    partition = live()
    partition.broke(BrokerError("commit failed"))
    assert partition.close() is TASK and partition.phase is Phase.CLOSED and str(partition.broken) == "commit failed"
    assert live().close() is TASK and live().broken is None


@pytest.mark.parametrize(
    ("setup", "step"),
    [
        (lambda p: None, lambda p: p.caught_up()),  # RESTORING: nothing to catch up yet
        (lambda p: None, lambda p: p.retry(1)),  # only a failed restore is retried
        (lambda p: p.restored(TASK), lambda p: p.restored(TASK)),  # restored twice
        (lambda p: p.restored(TASK), lambda p: p.rebuild(1)),  # only a broken partition is rebuilt
        (lambda p: p.restored(TASK), lambda p: p.restore_failed(StorageError("x"))),
    ],
)
def test_an_impossible_transition_is_a_bug_caught_where_it_happens(setup: Any, step: Any) -> None:
    partition = Partition(PID, 0)
    setup(partition)
    with pytest.raises(LifecycleError, match="please report this as a ckptlog bug"):
        step(partition)


def test_a_restore_a_rebalance_overtook_is_not_current() -> None:
    table = Partitions()
    first = table.assign(PID)
    assert table.current(first) and table.assign(PID) is first  # assigned: keeps its current one
    assert table.revoke([PID]) == [first] and PID not in table and not table.current(first)
    again = table.assign(PID)
    assert again is not first and again.epoch == table.epoch == 1 and table.current(again)
    other = table.assign(PartitionId("in", 1))
    table.revoke([])  # any rebalance voids every restore in flight
    assert not table.current(again) and not table.current(other)


def test_the_table_lists_tasks_due_retries_and_what_is_not_ready() -> None:
    clock = Clock()
    table = Partitions(clock)
    a, b = table.assign(PID), table.assign(PartitionId("in", 1))
    a.restored(TASK)
    b.restore_failed(StorageError("down"))
    assert table.tasks() == {PID: TASK} and table.due() == [] and table.not_ready() == [PID, b.pid]
    clock.now += RETRY_MAX_S
    assert table.due() == [b]
    a.caught_up()
    assert table.not_ready() == [b.pid] and table.assigned == {PID, b.pid}
