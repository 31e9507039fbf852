"""The kept checkpoints in sort order, best last, with O(log n) insert and remove.

Small lists (the common top-K case) live in two plain lists searched with `bisect` —
several times faster than a SortedKeyList at this size. Past `PROMOTE_AT` records the
memmove of a plain-list insert starts to dominate, so the records move to a
sortedcontainers SortedKeyList, whose cost stays logarithmic (keep=None runs).
Sort keys are unique (they end in the report index), so lookups by key are exact.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from itertools import islice
from typing import TYPE_CHECKING

from sortedcontainers import SortedKeyList

if TYPE_CHECKING:
    from processor.core.state import CheckpointRecord

PROMOTE_AT = 4096


def _sort_key(record: CheckpointRecord) -> tuple[bool, float, int]:
    return record.sort_key


class SortedRecords:
    __slots__ = ("_keys", "_items", "_big")

    def __init__(self) -> None:
        self._keys: list[tuple[bool, float, int]] = []
        self._items: list[CheckpointRecord] = []
        self._big: SortedKeyList | None = None

    def add(self, record: CheckpointRecord) -> None:
        if self._big is not None:
            self._big.add(record)
            return
        index = bisect_right(self._keys, record.sort_key)
        self._keys.insert(index, record.sort_key)
        self._items.insert(index, record)
        if len(self._items) > PROMOTE_AT:
            self._big = SortedKeyList(self._items, key=_sort_key)
            self._keys, self._items = [], []

    def remove(self, record: CheckpointRecord) -> None:
        if self._big is not None:
            self._big.remove(record)
            return
        index = bisect_left(self._keys, record.sort_key)
        if index == len(self._items) or self._items[index] is not record:
            raise ValueError(f"checkpoint {record.path!r} is not in the kept list")
        del self._keys[index]
        del self._items[index]

    def head(self, count: int) -> list[CheckpointRecord]:
        """The `count` worst records."""
        if self._big is not None:
            return list(islice(self._big, count))
        return self._items[:count]

    def last(self) -> CheckpointRecord | None:
        items = self._big if self._big is not None else self._items
        return items[-1] if items else None

    def __len__(self) -> int:
        return len(self._big) if self._big is not None else len(self._items)

    def __iter__(self) -> Iterator[CheckpointRecord]:
        return iter(self._big if self._big is not None else self._items)
