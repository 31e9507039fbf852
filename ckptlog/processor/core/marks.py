"""A producer's mark (contract §3 *Deduplication*): the sequence numbers of one producer a run applied.

- The *range* [lo, hi]: numbers that were all applied. It grows only by one at either end, and
  takes in the out-of-order numbers next to it as a gap closes (`absorb`), so a forged huge number
  covers nothing but itself.
- The *out-of-order numbers*: every other applied number, in `Block`s in application order. A
  block is a sorted array of numbers with one stamp, the last application that added to it; a
  number goes into the newest block, or a new one once that holds `BLOCK`. Before an insertion,
  the blocks whose stamp is older than the last W applications are dropped, oldest first: so
  every number among the last W applications is kept (its block's stamp is at least its own), and
  besides those at most the oldest block's (fewer than `BLOCK` numbers). A block holds its numbers
  as 4-byte offsets from a base while they span less than 2**32 (an Evaluator's results, numbered
  by the offsets of the requests they answer, always do), as 8-byte numbers otherwise.

Every change pushes its inverse (`(SEEN, owner, op, ...)`, undone by `undo`), so an event stays all
or nothing (contract §7).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

from ckptlog.processor.core.journal import SEEN

BLOCK = 256
"""Out-of-order numbers a block takes: the most a mark keeps beyond its last W applications."""
_SPAN = 2**32  # what 4-byte offsets ("I") hold

Push = Callable[[tuple[Any, ...]], None]

# undo entries: (SEEN, owner, op, ...); ops from 10 (the owner's own are below)
FIRST_OP = 10
_LISTED = 10  # mark: its first block, in a new list
_OPENED = 11  # mark: a new block appended
_INSERTED = 12  # block, index, stamp: a number inserted there; the block's stamp before
_WIDENED = 13  # block, ids, base: its offsets became 8-byte numbers
_EXPIRED = 14  # mark, block: the oldest block dropped
_ABSORBED = 15  # block, index, ids: numbers taken into the range from there


class Block:
    """Out-of-order numbers `base + ids[i]` (ascending) added up to application `stamp`."""

    __slots__ = ("base", "ids", "stamp")

    def __init__(self, seqs: Sequence[int], stamp: int) -> None:
        self.stamp = stamp
        if not seqs or seqs[-1] - seqs[0] >= _SPAN - 1:  # centred below: an odd span of 2**32 - 1 would not fit
            self.base, self.ids = 0, array("q", seqs)
        else:  # centred: a number up to 2**31 either side of the first fits
            self.base = (seqs[0] + seqs[-1]) // 2 - _SPAN // 2
            self.ids = array("I", [s - self.base for s in seqs])

    def numbers(self) -> list[int]:
        base = self.base
        return [v + base for v in self.ids]


class Mark:
    """Every sequence number in [lo, hi] was applied, and so was each number its `blocks` hold
    (outside the range, not next to it); `stamp`: the last application that touched the mark."""

    __slots__ = ("blocks", "hi", "lo", "stamp")

    def __init__(self, lo: int, hi: int, stamp: int) -> None:
        self.lo, self.hi, self.stamp = lo, hi, stamp
        self.blocks: list[Block] | None = None  # None for an in-order producer

    def __contains__(self, seq: int) -> bool:
        if self.lo <= seq <= self.hi:
            return True
        blocks = self.blocks
        return blocks is not None and holds(blocks, seq)

    def numbers(self) -> list[int]:
        """The out-of-order numbers, ascending."""
        return sorted(n for block in self.blocks or () for n in block.numbers())


def holds(blocks: list[Block], seq: int) -> bool:
    """Whether a block holds `seq`."""
    for block in blocks:
        ids = block.ids
        if ids:
            value = seq - block.base
            if ids[0] <= value <= ids[-1] and ids[bisect_left(ids, value)] == value:
                return True
    return False


def insert(owner: object, mark: Mark, seq: int, applied: int, window: int, push: Push) -> None:
    """Keep `seq` (outside the range, not next to it, not held) as applied at `applied`, after
    dropping the blocks no application of the last `window` added to."""
    blocks = mark.blocks
    if blocks is None:
        push((SEEN, owner, _LISTED, mark))
        blocks = mark.blocks = []
    oldest = applied - window  # applications up to it are older than the last `window`
    while blocks and blocks[0].stamp <= oldest:
        push((SEEN, owner, _EXPIRED, mark, blocks[0]))
        del blocks[0]
    if not blocks or len(blocks[-1].ids) >= BLOCK:
        if blocks:  # full: a copy of its exact size (an array grows ~6% ahead); same numbers, no undo
            blocks[-1].ids = array(blocks[-1].ids.typecode, blocks[-1].ids)
        opened = Block([seq], applied)  # made before its inverse is pushed: undo pops only what was appended
        push((SEEN, owner, _OPENED, mark))
        blocks.append(opened)
        return
    block = blocks[-1]
    if block.ids.typecode == "I" and not 0 <= seq - block.base < _SPAN:
        push((SEEN, owner, _WIDENED, block, block.ids, block.base))
        block.ids, block.base = array("q", block.numbers()), 0
    value = seq - block.base
    at = bisect_left(block.ids, value)
    push((SEEN, owner, _INSERTED, block, at, block.stamp))
    block.ids.insert(at, value)
    block.stamp = applied


def absorb(owner: object, mark: Mark, push: Push) -> None:
    """Take the held numbers next to the range into it (the caller pushed the range's fields)."""
    blocks = mark.blocks
    assert blocks is not None
    lo, hi = mark.lo, mark.hi
    while holds(blocks, hi + 1):  # each number taken in costs a lookup: once per number
        hi += 1
    while holds(blocks, lo - 1):
        lo -= 1
    if lo == mark.lo and hi == mark.hi:
        return
    for block in blocks:
        for first, last in ((mark.hi + 1, hi), (lo, mark.lo - 1)):  # above first: it sits later in a block
            ids = block.ids
            start, end = bisect_left(ids, first - block.base), bisect_right(ids, last - block.base)
            if start < end:
                push((SEEN, owner, _ABSORBED, block, start, ids[start:end]))
                del ids[start:end]
    mark.lo, mark.hi = lo, hi


def undo(op: int, args: tuple[Any, ...]) -> None:
    """Undo one entry `insert` or `absorb` pushed."""
    if op == _LISTED:
        args[0].blocks = None
    elif op == _OPENED:
        args[0].blocks.pop()
    elif op == _INSERTED:
        block, at, block.stamp = args
        del block.ids[at]
    elif op == _WIDENED:
        block, block.ids, block.base = args
    elif op == _EXPIRED:
        mark, block = args
        mark.blocks.insert(0, block)
    elif op == _ABSORBED:
        block, at, ids = args
        block.ids[at:at] = ids


# -- snapshots (contract §6) ----------------------------------------------------------


def mark_data(producer: str, mark: Mark) -> list[Any]:
    """[producer, lo, hi, stamp, [[block stamp, [number, ...]], ...]], blocks oldest first."""
    blocks = [[block.stamp, block.numbers()] for block in mark.blocks or ()]
    return [producer, mark.lo, mark.hi, mark.stamp, blocks]


def count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise ValueError(f"dedup state: {value!r} is not a count")
    return value


def mark_of(producer: str, lo: Any, hi: Any, stamp: Any, blocks: Any, applied: int) -> Mark:
    """One mark of a snapshot, checked: lo <= hi, stamps up to `applied`, blocks in application
    order (stamps ascending, up to the mark's) of at most `BLOCK` ascending numbers each, every
    number in one block only, outside the range and not next to it (`remember` takes those in)."""
    mark = Mark(count(lo), count(hi), count(stamp))
    if mark.lo > mark.hi or mark.stamp > applied or not isinstance(blocks, list):
        raise ValueError(f"dedup state: mark {producer!r} is not a range with a list of blocks")
    stamps, numbers = _blocks_of(producer, blocks)
    if any(a >= b for a, b in pairwise(stamps)) or any(s > mark.stamp for s in stamps):
        raise ValueError(f"dedup state: mark {producer!r} has blocks out of application order")
    every = [n for ns in numbers for n in ns]
    if len(set(every)) != len(every) or any(mark.lo - 1 <= n <= mark.hi + 1 for n in every):
        raise ValueError(f"dedup state: mark {producer!r} has numbers in two blocks, in its range or next to it")
    if blocks:
        mark.blocks = [Block(ns, s) for s, ns in zip(stamps, numbers, strict=True)]
    return mark


def _blocks_of(producer: str, blocks: list[Any]) -> tuple[list[int], list[list[int]]]:
    """Each block's stamp and numbers, checked: [stamp, [number, ...]], at most `BLOCK` ascending."""
    if not all(isinstance(b, list) and len(b) == 2 and isinstance(b[1], list) for b in blocks):
        raise ValueError(f"dedup state: mark {producer!r} has a block that is not [stamp, [number, ...]]")
    stamps, numbers = [count(b[0]) for b in blocks], [[count(n) for n in b[1]] for b in blocks]
    if any(len(ns) > BLOCK or any(a >= b for a, b in pairwise(ns)) for ns in numbers):
        raise ValueError(f"dedup state: mark {producer!r} has a block too long or not ascending")
    return stamps, numbers
