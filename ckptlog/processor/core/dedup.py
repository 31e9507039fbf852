"""Deduplication (contract §3 *Deduplication*): what a run remembers of the ids it applied.

Exact, never probabilistic: `known` is True only for an id the run applied (a new event is never
taken for a repeat), and every id among the run's last W applied ids (W: the fold's
`dedup_window`) is known, as the plain window of W ids before it did. What it costs:

- *Structured ids* (ckptlog/events/event_ids.py: a producer and a sequence number): per producer
  a `Mark` (ckptlog/processor/core/marks.py), the range [lo, hi] of sequence numbers that were all
  applied, which grows only by one at either end (so a forged huge sequence number covers nothing
  but itself), plus the applied numbers outside the range in blocks of up to 256 in application
  order, one stamp a block, 4 bytes a number (8 when a block spans 2**32 or more), a block dropped
  once no application of the last W added to it. In-order producers (every report of a Reporter
  or a trainer) cost a range each; out-of-order ones (an Evaluator's results) 4 bytes a number
  among the last W applications, plus at most one older block. A run keeps at most `MARKS`
  producers; a new one takes the place of one untouched for W applications, else its ids are
  remembered as foreign ones.
- *Foreign ids*: the last W of them, as strings: a list used as a ring in application order (a
  deque's first block alone is 624 bytes, a third of a fresh run's state) and a set.

Every change pushes its inverse to the fold's undo journal (`undo`), so an event stays all or
nothing (contract §7). `expect` is the id that extends the producer extended last: for it,
`known` is one string comparison and `remember` a few attribute writes (the report stream).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ckptlog.events.event_ids import PREFIX, is_producer, parse, render
from ckptlog.processor.core import marks
from ckptlog.processor.core.journal import SEEN
from ckptlog.processor.core.marks import Mark, Push, absorb, count, mark_data, mark_of

MARKS = 32
"""Producers a run keeps a mark for."""

# undo entries: (SEEN, seen, op, ...); a mark's own from marks.FIRST_OP
_UP = 0  # mark, lo, hi, stamp, applied, expect: the fast path (the expected id extended its mark)
_STATE = 1  # applied, expect, expect_producer, expect_mark
_FIELDS = 2  # mark, lo, hi, stamp
_ADDED = 6  # producer: a new mark
_DROPPED = 7  # producer, mark, position: a mark untouched for W applications gave its place
_FOREIGN = 8  # event id, the id it took the place of in the full ring (or None), at, applied


class Seen:
    """The ids one run applied (module docstring)."""

    __slots__ = ("applied", "expect", "expect_mark", "expect_producer", "foreign", "foreign_set", "head", "marks")

    def __init__(self) -> None:
        self.applied = 0  # applications remembered: the clock of stamps
        self.marks: dict[str, Mark] = {}
        self.foreign: list[str] = []  # the foreign ids; once full (W), a ring whose oldest is at `head`
        self.foreign_set: set[str] = set()
        self.head = 0
        self.expect = ""  # no id is empty
        self.expect_producer = ""
        self.expect_mark: Mark | None = None

    def known(self, event_id: str, run_id: str) -> bool:
        """Whether the run applied `event_id` and remembers it."""
        if event_id in self.foreign_set:  # foreign, or structured while every mark was taken
            return True
        if event_id == self.expect or not event_id.startswith(PREFIX):
            return False
        key = parse(event_id, run_id)
        if key is None:
            return False
        mark = self.marks.get(key[0])
        return mark is not None and key[1] in mark

    def remember(self, event_id: str, run_id: str, window: int, push: Push) -> None:
        """Remember an applied id (not `known`): the last `window` applications stay known."""
        if event_id == self.expect:
            mark = self.expect_mark
            assert mark is not None
            push((SEEN, self, _UP, mark, mark.lo, mark.hi, mark.stamp, self.applied, event_id))
            self.applied += 1
            mark.hi += 1
            mark.stamp = self.applied
            if mark.blocks:
                absorb(self, mark, push)
            self.expect = render(self.expect_producer, mark.hi + 1, run_id)
            return
        if not event_id.startswith(PREFIX):  # foreign: its one undo entry restores `applied` too
            self._foreign(event_id, window, push)
            self.applied += 1
            return
        push((SEEN, self, _STATE, self.applied, self.expect, self.expect_producer, self.expect_mark))
        self.applied += 1
        key = parse(event_id, run_id)
        if key is None or not self._structured(*key, run_id, window, push):
            self._foreign(event_id, window, push)

    def _structured(self, producer: str, seq: int, run_id: str, window: int, push: Push) -> bool:
        """Remember (producer, seq) in its mark; False when no mark can take it."""
        mark = self.marks.get(producer)
        if mark is None:
            if len(self.marks) >= MARKS and not self._drop_stale(window, push):
                return False
            push((SEEN, self, _ADDED, producer))
            mark = self.marks[producer] = Mark(seq, seq, self.applied)
        elif seq not in mark:
            push((SEEN, self, _FIELDS, mark, mark.lo, mark.hi, mark.stamp))
            mark.stamp = self.applied
            if seq == mark.hi + 1 or seq == mark.lo - 1:
                mark.lo, mark.hi = min(mark.lo, seq), max(mark.hi, seq)
                if mark.blocks:
                    absorb(self, mark, push)
            else:
                marks.insert(self, mark, seq, self.applied, window, push)
                return True
        self.expect, self.expect_producer, self.expect_mark = render(producer, mark.hi + 1, run_id), producer, mark
        return True

    def _drop_stale(self, window: int, push: Push) -> bool:
        """Give the place of the mark touched longest ago to a new producer, if that was more than
        `window` applications ago (so every id it holds is older than the last `window`)."""
        producer = min(self.marks, key=lambda p: self.marks[p].stamp)
        if self.marks[producer].stamp > self.applied - window:
            return False
        push((SEEN, self, _DROPPED, producer, self.marks[producer], list(self.marks).index(producer)))
        del self.marks[producer]
        if self.expect_producer == producer:
            self.expect, self.expect_producer, self.expect_mark = "", "", None
        return True

    def _foreign(self, event_id: str, window: int, push: Push) -> None:
        ring, at = self.foreign, self.head
        self.foreign_set.add(event_id)
        if len(ring) < window:
            push((SEEN, self, _FOREIGN, event_id, None, at, self.applied))
            ring.append(event_id)
            return
        push((SEEN, self, _FOREIGN, event_id, ring[at], at, self.applied))
        self.foreign_set.discard(ring[at])
        ring[at] = event_id
        self.head = at + 1 if at + 1 < len(ring) else 0

    def foreign_ids(self) -> list[str]:
        """The foreign ids, oldest first."""
        return self.foreign[self.head :] + self.foreign[: self.head]

    def undo(self, entry: tuple[Any, ...]) -> None:
        """Undo one journal entry this object pushed (the journal calls them newest first)."""
        op, args = entry[2], entry[3:]
        if op == _UP:
            mark, mark.lo, mark.hi, mark.stamp, self.applied, self.expect = args
        elif op == _STATE:
            self.applied, self.expect, self.expect_producer, self.expect_mark = args
        elif op == _FIELDS:
            mark, mark.lo, mark.hi, mark.stamp = args
        elif op >= marks.FIRST_OP:
            marks.undo(op, args)
        elif op == _ADDED:
            del self.marks[args[0]]
        elif op == _DROPPED:
            producer, mark, at = args
            items = list(self.marks.items())
            self.marks = dict([*items[:at], (producer, mark), *items[at:]])
        elif op == _FOREIGN:
            self._unforeign(*args)

    def _unforeign(self, event_id: str, replaced: str | None, at: int, applied: int) -> None:
        self.applied = applied
        self.foreign_set.discard(event_id)
        if replaced is None:
            self.foreign.pop()
        else:
            self.foreign[at] = replaced
            self.foreign_set.add(replaced)
        self.head = at

    # -- snapshots (contract §6) ----------------------------------------------------------

    def data(self, *, foreign: bool = True) -> dict[str, Any]:
        """JSON-ready: `applied`, each mark as [producer, lo, hi, stamp, [[stamp, [seq, ...]], ...]]
        (`marks.mark_data`) in the order the marks were made, and the foreign ids oldest first
        (none if not `foreign`: a retired run's kept state, contract §3 "Reopened runs")."""
        produced = [mark_data(p, m) for p, m in self.marks.items()]
        return {"applied": self.applied, "marks": produced, "foreign": self.foreign_ids() if foreign else []}

    @classmethod
    def of_data(cls, data: dict[str, Any], run_id: str) -> Seen:
        """What `data()` wrote; ValueError when it is not a state `remember` could have made."""
        seen = cls()
        seen.applied = count(data["applied"])
        for fields in data["marks"]:
            if not isinstance(fields, list) or len(fields) != 5:
                raise ValueError(f"dedup state: mark {fields!r} is not [producer, lo, hi, stamp, blocks]")
            producer, lo, hi, stamp, blocks = fields
            if not isinstance(producer, str) or not is_producer(producer):
                raise ValueError(f"dedup state: {producer!r} is not a producer")
            seen.marks[producer] = mark_of(producer, lo, hi, stamp, blocks, seen.applied)
        foreign = data["foreign"]
        if not isinstance(foreign, list) or not all(isinstance(i, str) for i in foreign):
            raise ValueError(f"run {run_id!r}: the foreign ids are not a list of strings")
        seen.foreign, seen.foreign_set = list(foreign), set(foreign)
        if not len(seen.marks) == len(data["marks"]) <= MARKS or len(seen.foreign_set) != len(foreign):
            raise ValueError(f"run {run_id!r}: dedup state has repeated or too many marks, or repeated foreign ids")
        if seen.marks:  # the fast path again: the mark touched last
            producer = max(seen.marks, key=lambda p: seen.marks[p].stamp)
            mark = seen.marks[producer]
            seen.expect, seen.expect_producer, seen.expect_mark = render(producer, mark.hi + 1, run_id), producer, mark
        return seen

    @classmethod
    def of_ids(cls, ids: Iterable[str], run_id: str, window: int) -> Seen:
        """An older snapshot's window (its last `window` applied ids, oldest first), remembered in
        order as if each were applied now."""
        seen, journal = cls(), list[tuple[Any, ...]]()
        for event_id in ids:
            if not isinstance(event_id, str):
                raise ValueError(f"run {run_id!r}: seen id {event_id!r} is not a string")
            if not seen.known(event_id, run_id):
                seen.remember(event_id, run_id, window, journal.append)
                journal.clear()
        return seen
