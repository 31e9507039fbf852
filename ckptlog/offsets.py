"""Which offset of a partition is safe to commit while requests finish out of order.

The evaluator runs several requests at once; committing offset N tells the group "every
request below N is done". So the commit point is the lowest unfinished request, or one
past the highest dispatched when nothing is unfinished. An evaluator that dies mid-task
leaves its unfinished requests above the commit point, and the next owner redoes them.
"""

from __future__ import annotations


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
