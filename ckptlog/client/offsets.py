"""Which offset of a partition is safe to commit while requests finish out of order.

The evaluator runs several requests at once; committing offset N tells the group "every
request below N is done". So the commit point is the lowest unfinished request, or one
past the highest dispatched when nothing is unfinished. An evaluator that dies mid-task
leaves its unfinished requests above the commit point, and the next owner redoes them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from ckptlog.kafka.records import PartitionId


class PartitionProgress:
    """Dispatched and finished offsets of one partition for one assignment."""

    def __init__(self) -> None:
        self._unfinished: set[int] = set()
        self._next: int | None = None
        self.committed: int | None = None

    def dispatched(self, offset: int) -> None:
        self._unfinished.add(offset)
        self._next = max(self._next or 0, offset + 1)

    def finished(self, offset: int) -> None:
        self._unfinished.discard(offset)

    @property
    def unfinished(self) -> int:
        return len(self._unfinished)

    def committable(self) -> int | None:
        """The offset to commit now, or None when it would not move the commit point."""
        if self._next is None:
            return None
        point = min(self._unfinished) if self._unfinished else self._next
        if self.committed is not None and point <= self.committed:
            return None
        return point


class StartedRequests:
    """The requests this process has started, by partition and offset, and whether each finished
    (its result acknowledged) — kept across rebalances, unlike PartitionProgress.

    With eager rebalancing (aiokafka's) every rebalance revokes all of a member's partitions, and
    one handed back to the same member is fetched again from its committed offset: the requests
    still running here, or finished since the last commit, come round again and must not run a
    second time. An entry goes once a commit passes it, or once it has finished while its partition
    belongs to another member; should that partition come back later, whatever its owner did not
    commit is redone (at least once)."""

    def __init__(self) -> None:
        self._done: dict[PartitionId, dict[int, bool]] = {}

    def started(self, pid: PartitionId, offset: int) -> None:
        self._done.setdefault(pid, {})[offset] = False

    def state(self, pid: PartitionId, offset: int) -> Literal["running", "finished"] | None:
        done = self._done.get(pid, {}).get(offset)
        return None if done is None else "finished" if done else "running"

    def finished(self, pid: PartitionId, offset: int, *, keep: bool) -> None:
        """Its result was acknowledged; `keep`: its partition is (or may come back) ours."""
        offsets = self._done.get(pid)
        if offsets is not None and offset in offsets:
            if keep:
                offsets[offset] = True
            else:
                self.forget(pid, offset)

    def forget(self, pid: PartitionId, offset: int) -> None:
        offsets = self._done.get(pid, {})
        offsets.pop(offset, None)
        if not offsets:
            self._done.pop(pid, None)

    def committed(self, pid: PartitionId, point: int) -> None:
        """The group committed `point`: finished requests below it are done with."""
        for offset, done in list(self._done.get(pid, {}).items()):
            if done and offset < point:
                self.forget(pid, offset)

    def retain(self, assigned: Collection[PartitionId]) -> None:
        """A new assignment: finished requests of partitions now owned elsewhere are forgotten."""
        for pid, offsets in list(self._done.items()):
            if pid not in assigned:
                for offset in [o for o, done in offsets.items() if done]:
                    self.forget(pid, offset)

    @property
    def size(self) -> int:
        return sum(len(offsets) for offsets in self._done.values())
