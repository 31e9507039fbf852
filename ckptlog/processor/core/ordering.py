"""The kept checkpoints in sort order, best last, with O(log n) insert and remove.

Small lists (the common top-K case) live in two plain lists searched with `bisect` —
several times faster than any tree at this size. Past `PROMOTE_AT` records they move to
`_Blocks`: a list of sorted blocks (the sortedcontainers layout) whose keys are stored
unboxed in `array`s. A million records then cost no more cache misses per insert than a
thousand: the bisect reads one contiguous block of doubles instead of chasing a pointer
to a tuple and its float per comparison (with a SortedKeyList the per-insert cost grew
3.4x from 20k to 1M records; see docs/benchmarks.md).

A sort key `(has_score, value, report_index)` is stored as `(value, tiebreak)`: no score
becomes `(-inf, report_index)` and a score becomes `(value, 2**62 | report_index)`, so a real
-inf still ranks above no score and equal values order by report index. Keys are unique
(they end in the report index), so a record is found exactly by its key.

Scores compare exactly, as Python compares ints and floats (contract §3): a double holds every
float and every int up to 2**53 exactly, so those are stored unboxed; the first score that
does not fit (an int beyond 2**53, or beyond the float range) turns the blocks *exact*: values
kept as Python numbers in lists, compared by Python. Order never depends on the list's size.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptlog.processor.core.scoring import Score, SortKey
    from ckptlog.processor.core.state import CheckpointRecord

PROMOTE_AT = 4096
BLOCK = 256  # a block splits in two past this many: an insert then moves ~2 KB per array, not ~8 KB
_HAS = 1 << 62
_NEG_INF = float("-inf")


def _compact(key: SortKey) -> tuple[Score, int]:
    has, value, report_index = key
    return (value, _HAS | report_index) if has else (_NEG_INF, report_index)


_EXACT_FLOAT = 2**53


def fits_double(value: Score) -> bool:
    """Whether a score is stored exactly in a double: a float, or an int of at most 53 bits."""
    return type(value) is not int or -_EXACT_FLOAT <= value <= _EXACT_FLOAT


def _below(values: Any, ties: array[int], value: Score, tie: int) -> int:
    """How many keys in the (sorted) block are smaller than `(value, tie)`."""
    lo = bisect_left(values, value)
    if lo == len(values) or values[lo] != value:  # no equal value (the common case): one bisect
        return lo
    return bisect_left(ties, tie, lo, bisect_right(values, value, lo))


class _Blocks:
    """Sorted blocks of records with unboxed keys; `max_*` hold each block's last key.
    `exact`: values are Python numbers in lists (some score does not fit a double)."""

    __slots__ = ("exact", "items", "max_ties", "max_values", "size", "ties", "values")

    def __init__(self, records: list[CheckpointRecord], exact: bool = False) -> None:
        self.exact = exact
        self._load(records)

    def _numbers(self, values: list[Score]) -> Any:
        """A block's values: unboxed doubles, or Python numbers when the blocks are exact."""
        return list(values) if self.exact else array("d", values)

    def _load(self, records: list[CheckpointRecord]) -> None:
        self.values: list[Any] = []
        self.ties: list[array[int]] = []
        self.items: list[list[CheckpointRecord]] = []
        self.max_values: Any = self._numbers([])
        self.max_ties: array[int] = array("q")
        self.size = len(records)
        for start in range(0, len(records), BLOCK // 2):
            chunk = records[start : start + BLOCK // 2]
            keys = [_compact(r.sort_key) for r in chunk]
            self.values.append(self._numbers([k[0] for k in keys]))
            self.ties.append(array("q", [k[1] for k in keys]))
            self.items.append(chunk)
            self.max_values.append(keys[-1][0])
            self.max_ties.append(keys[-1][1])

    def add(self, record: CheckpointRecord) -> None:
        has, value, tie = record.sort_key  # _compact() inlined: this runs once per report
        if has:
            tie |= _HAS
        else:
            value = _NEG_INF
        items = self.items
        if not items:  # every record was removed: start a block again
            self._load([record])
            return
        b = _below(self.max_values, self.max_ties, value, tie)
        if b == len(items):
            b -= 1  # above every key: the last block
        values, ties = self.values[b], self.ties[b]
        i = _below(values, ties, value, tie)
        values.insert(i, value)
        ties.insert(i, tie)
        items[b].insert(i, record)
        self.size += 1
        if i == len(values) - 1:
            self.max_values[b], self.max_ties[b] = value, tie
        if len(values) > BLOCK:
            self._split(b)

    def _split(self, b: int) -> None:
        half = BLOCK // 2
        values, ties, items = self.values[b], self.ties[b], self.items[b]
        self.values[b : b + 1] = [values[:half], values[half:]]
        self.ties[b : b + 1] = [ties[:half], ties[half:]]
        self.items[b : b + 1] = [items[:half], items[half:]]
        self.max_values.insert(b, values[half - 1])
        self.max_ties.insert(b, ties[half - 1])

    def remove(self, record: CheckpointRecord) -> None:
        value, tie = _compact(record.sort_key)
        b = _below(self.max_values, self.max_ties, value, tie)
        if b == len(self.items):
            raise ValueError(f"checkpoint {record.path!r} is not in the kept list")
        values, ties, items = self.values[b], self.ties[b], self.items[b]
        i = _below(values, ties, value, tie)
        if i == len(items) or items[i] is not record:
            raise ValueError(f"checkpoint {record.path!r} is not in the kept list")
        self._delete(b, i)

    def pop(self, index: int) -> None:
        b = 0
        while index >= len(self.items[b]):  # walk from the head: retention pops near it
            index -= len(self.items[b])
            b += 1
        self._delete(b, index)

    def _delete(self, b: int, i: int) -> None:
        """Drop the i-th record of block b, keeping the block maxima (and no empty block)."""
        values, ties, items = self.values[b], self.ties[b], self.items[b]
        del values[i], ties[i], items[i]
        self.size -= 1
        if not items:
            del self.values[b], self.ties[b], self.items[b], self.max_values[b], self.max_ties[b]
        elif i == len(items):
            self.max_values[b], self.max_ties[b] = values[-1], ties[-1]

    def __iter__(self) -> Iterator[CheckpointRecord]:
        return chain.from_iterable(self.items)


class SortedRecords:
    __slots__ = ("_big", "_items", "_keys")

    def __init__(self) -> None:
        self._keys: list[SortKey] = []
        self._items: list[CheckpointRecord] = []
        self._big: _Blocks | None = None

    def add(self, record: CheckpointRecord) -> int:
        """Insert; returns the new size (saves the fold a `len()` call per report)."""
        big = self._big
        if big is not None:
            if not big.exact and not fits_double(record.sort_key[1]):
                big = self._big = _Blocks(list(big), exact=True)
            big.add(record)
            return big.size
        items = self._items
        index = bisect_right(self._keys, record.sort_key)
        self._keys.insert(index, record.sort_key)
        items.insert(index, record)
        size = len(items)
        if size > PROMOTE_AT:
            self._big = _Blocks(items, exact=not all(fits_double(key[1]) for key in self._keys))
            self._keys, self._items = [], []
        return size

    @classmethod
    def loaded(cls, records: list[CheckpointRecord]) -> SortedRecords:
        """A list holding `records` (already in sort order), built in one go: no insert path."""
        loaded = cls()
        if len(records) > PROMOTE_AT:
            loaded._big = _Blocks(records, exact=not all(fits_double(r.sort_key[1]) for r in records))
        else:
            loaded._keys, loaded._items = [r.sort_key for r in records], list(records)
        return loaded

    def remove(self, record: CheckpointRecord) -> None:
        if self._big is not None:
            self._big.remove(record)
            return
        index = bisect_left(self._keys, record.sort_key)
        if index == len(self._items) or self._items[index] is not record:
            raise ValueError(f"checkpoint {record.path!r} is not in the kept list")
        del self._keys[index]
        del self._items[index]

    def pop(self, index: int) -> None:
        """Drop the record at `index` (0 = the worst). Costs O(index / BLOCK + log n): retention
        pops only near the head."""
        if self._big is not None:
            self._big.pop(index)
            return
        del self._keys[index]
        del self._items[index]

    def head(self, count: int) -> list[CheckpointRecord]:
        """The `count` worst records."""
        if self._big is not None:
            return list(islice(self._big, count))
        return self._items[:count]

    def last(self) -> CheckpointRecord | None:
        if self._big is not None:
            return self._big.items[-1][-1] if self._big.size else None
        return self._items[-1] if self._items else None

    def __len__(self) -> int:
        return self._big.size if self._big is not None else len(self._items)

    def __iter__(self) -> Iterator[CheckpointRecord]:
        return iter(self._big) if self._big is not None else iter(self._items)
