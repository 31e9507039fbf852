"""Deduplication (contract §3 "Deduplication"), against a model that keeps every applied id.

Two properties on every stream, however hostile (reordered, repeated far back, structured and
foreign ids mixed, structured-looking forgeries, more producers than a run keeps marks for,
rollbacks, snapshots and older snapshots' windows restored part-way):

- exact: an id the run says it knows was applied (a new event is never dropped as a duplicate);
- as strong as the window of W ids before: every id among the last W applied is known.

And beyond the window: an in-order producer's ids stay known for as long as its mark is kept.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlog.events.event_ids import parse
from ckptlog.processor.core import dedup, marks
from ckptlog.processor.core.dedup import Seen

RUN = "r"
PROFILE = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PRODUCERS = ["r:0", "r:0", "r:0", "r:1", "a:job:0", "g", "ad", "v:ckptlog.events:0:1"]
SEQS = st.one_of(st.integers(0, 12), st.integers(0, 40), st.sampled_from([10**17, 10**18 - 1]))
STRUCTURED = st.builds(lambda producer, seq: f"ck1:{producer}:{seq}:{RUN}", st.sampled_from(PRODUCERS), SEQS)
FORGED = st.builds(
    lambda spelling, n: spelling.format(n=n, r=RUN),
    st.sampled_from(
        [
            "ck1:r:0:0{n}:{r}",  # a leading zero: another spelling of n
            "ck1:r:00:{n}:{r}",
            "ck1:r:0:{n}:{r}2",  # another run
            "ck1:r:0:{n}:x{r}",
            "ck1:r:0:{n}:",
            "ck1:r:0:{n}",
            "ck1:r:0:{n}:{r}:",
            "ck1:r:0:+{n}:{r}",
            "ck1:r:0:{n} :{r}",
            "ck1:R:0:{n}:{r}",
            "ck1:x:{n}:{r}",
            "ck1:r:0:1{n}000000000000000000:{r}",  # 19 digits and more: outside the grammar
            "ck1:r:0:\u0661{n}:{r}",  # an Arabic-Indic digit: int() would read it
            "ck1:a:bad token:0:{n}:{r}",
            "ck1:g:{n}:{r}\n",
        ]
    ),
    st.integers(0, 24),
)
FOREIGN = st.one_of(st.text(min_size=1, max_size=3), st.uuids().map(str), st.integers(0, 24).map(lambda n: f"e{n}"))
# a redelivery of the k-th latest applied id: at the window's edge (W <= 8), or far back
AGAIN = st.one_of(st.integers(0, 9), st.integers(0, 200))
IDS = st.one_of(STRUCTURED, STRUCTURED, FORGED, FOREIGN, AGAIN, AGAIN)
REJECTED = st.sampled_from([False, False, False, True])  # a rejected event is not remembered
THEN = st.sampled_from(["", "", "", "", "", "undo", "snapshot", "old"])  # what happens after it is remembered
STEPS = st.lists(st.tuples(IDS, REJECTED, THEN), min_size=5, max_size=150)
# few producers, short sequences: marks fill, extend, go stale and give their place often
FEW = st.builds(lambda p, n: f"ck1:{p}:{n}:{RUN}", st.sampled_from(["r:0", "r:1", "r:2", "g"]), st.integers(0, 6))
FEW_STEPS = st.lists(st.tuples(st.one_of(FEW, FEW, st.integers(0, 9)), REJECTED, THEN), min_size=10, max_size=100)


class Model:
    """Every applied id, in order."""

    def __init__(self, window: int) -> None:
        self.window, self.applied, self.ids = window, list[str](), set[str]()

    def check(self, seen: Seen, event_id: str) -> bool:
        known = seen.known(event_id, RUN)
        if known:
            assert event_id in self.ids, f"{event_id!r} was never applied but is taken for a repeat"
        if event_id in self.applied[-self.window :]:
            assert known, f"{event_id!r} is among the last {self.window} applied but not known"
        return known

    def apply(self, seen: Seen, event_id: str) -> list[tuple[Any, ...]]:
        journal: list[tuple[Any, ...]] = []
        seen.remember(event_id, RUN, self.window, journal.append)
        self.applied.append(event_id)
        self.ids.add(event_id)
        return journal


def state(seen: Seen) -> tuple[Any, ...]:
    assert seen.foreign_set == set(seen.foreign) and len(seen.foreign_set) == len(seen.foreign)
    return json.dumps(seen.data()), seen.expect, seen.expect_producer, seen.expect_mark


def restored(seen: Seen) -> Seen:
    return Seen.of_data(json.loads(json.dumps(seen.data())), RUN)


def play(steps: list[tuple[str | int, bool, str]], window: int, block: int = marks.BLOCK) -> None:
    """Drive one run's Seen through `steps` (out-of-order numbers in blocks of `block`), checking the
    model at every one; a twin that is never undone nor restored must answer the same."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(marks, "BLOCK", block)
        _play(steps, window)


def _play(steps: list[tuple[str | int, bool, str]], window: int) -> None:
    model, seen, twin = Model(window), Seen(), Seen()
    for drawn, rejected, then in steps:
        applied = model.applied
        event_id = drawn if isinstance(drawn, str) else applied[-1 - drawn % len(applied)] if applied else "first"
        known = model.check(seen, event_id)
        assert twin.known(event_id, RUN) == known or then == "old"
        if known or rejected:
            continue
        before = state(seen)
        journal = model.apply(seen, event_id)
        twin.remember(event_id, RUN, window, [].append)
        if then == "undo":  # a fault after the id was remembered: the journal takes it back
            for entry in reversed(journal):
                seen.undo(entry)
            assert state(seen) == before
            seen.remember(event_id, RUN, window, [].append)
        elif then == "snapshot":
            seen = restored(seen)
        elif then == "old":  # a schema 5 snapshot: the last W ids, oldest first
            seen, twin = (Seen.of_ids(model.applied[-window:], RUN, window) for _ in range(2))
        if then != "old":
            assert json.dumps(seen.data()) == json.dumps(twin.data())


@PROFILE
@given(STEPS, st.integers(1, 8), st.sampled_from([1, 2, 4, marks.BLOCK]))
def test_hostile_streams_are_exact_and_as_strong_as_the_window(
    steps: list[tuple[str | int, bool, str]], window: int, block: int
) -> None:
    play(steps, window, block)


@PROFILE
@given(st.one_of(STEPS, FEW_STEPS), st.integers(1, 8), st.integers(1, 3))
def test_more_producers_than_marks(steps: list[tuple[str | int, bool, str]], window: int, marks: int) -> None:
    """With room for fewer marks than producers, marks give their place or ids spill to the foreign window."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dedup, "MARKS", marks)
        play(steps, window, block=2)


@PROFILE
@given(st.permutations(list(range(40))), st.lists(THEN, min_size=40, max_size=40), st.integers(1, 6))
def test_reordered_sequences_are_exact(order: list[int], then: list[str], window: int) -> None:
    """Out-of-order numbers fill the range as gaps close (and a rollback opens them again); nothing
    unapplied is ever inside it."""
    play([(f"ck1:r:0:{n}:{RUN}", False, after) for n, after in zip(order, then, strict=True)], window, block=2)


def test_an_in_order_producer_is_known_far_beyond_the_window() -> None:
    model, seen = Model(4), Seen()
    for n in range(10_000):
        model.apply(seen, f"ck1:a:job:3:{n}:{RUN}")
    assert all(seen.known(f"ck1:a:job:3:{n}:{RUN}", RUN) for n in range(10_000))
    assert not seen.known(f"ck1:a:job:3:10000:{RUN}", RUN) and not seen.known(f"ck1:a:job:4:0:{RUN}", RUN)
    assert len(seen.marks) == 1 and not seen.foreign and seen.marks["a:job:3"].blocks is None


def test_a_forged_huge_sequence_covers_only_itself() -> None:
    """A hostile id far ahead makes no later genuine id look applied: the range only grows by one."""
    model, seen = Model(4096), Seen()
    model.apply(seen, f"ck1:r:0:{10**18 - 1}:{RUN}")
    for n in range(100):
        assert not model.check(seen, f"ck1:r:0:{n}:{RUN}")
        model.apply(seen, f"ck1:r:0:{n}:{RUN}")
    assert all(model.check(seen, f"ck1:r:0:{n}:{RUN}") for n in range(100))
    assert model.check(seen, f"ck1:r:0:{10**18 - 1}:{RUN}") and not model.check(seen, f"ck1:r:0:{10**18 - 2}:{RUN}")


def test_out_of_order_ids_are_dropped_only_once_older_than_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sparse numbers (an evaluator's results: the requests' offsets) cost 4 bytes each while they
    are among the last W applications, and are dropped after, a block at a time."""
    monkeypatch.setattr(marks, "BLOCK", 16)
    window, model, seen = 64, Model(64), Seen()
    for n in range(1000):
        model.apply(seen, f"ck1:v:ckptlog.events:0:1:{10 * n}:{RUN}")
        assert all(model.check(seen, i) for i in model.applied[-window:])
        held = seen.marks["v:ckptlog.events:0:1"].numbers()
        assert min(n, window) <= len(held) < window + 16  # the last W, and at most one older block
    mark = seen.marks["v:ckptlog.events:0:1"]
    assert mark.blocks is not None and all(b.ids.typecode == "I" and b.ids.itemsize == 4 for b in mark.blocks)
    assert parse(model.applied[0], RUN) == ("v:ckptlog.events:0:1", 0) and seen.known(model.applied[0], RUN)
    assert not seen.known(model.applied[500], RUN)  # dropped: older than the last W applications


def test_foreign_ids_keep_the_last_window() -> None:
    model, seen = Model(3), Seen()
    for n in range(10):
        model.apply(seen, f"id{n}")
    assert seen.foreign_ids() == ["id7", "id8", "id9"] and seen.foreign_set == {"id7", "id8", "id9"}
    assert not seen.known("id6", RUN)


def test_a_new_producer_takes_the_place_of_a_stale_mark_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mark gives its place once it was not touched by any of the last W applications (the new
    one included): then every id it holds is older than the window."""
    monkeypatch.setattr(dedup, "MARKS", 2)
    model, seen = Model(4), Seen()
    for event_id in (f"ck1:r:0:0:{RUN}", f"ck1:r:1:0:{RUN}", f"ck1:r:2:0:{RUN}", f"ck1:r:1:1:{RUN}"):
        model.apply(seen, event_id)  # applications 1-4; the third spills: both marks were touched within 4
    assert list(seen.marks) == ["r:0", "r:1"] and seen.foreign_ids() == [f"ck1:r:2:0:{RUN}"]
    model.apply(seen, f"ck1:r:3:0:{RUN}")  # application 5: r:0 (touched at 1) is outside 2-5, it gives its place
    assert list(seen.marks) == ["r:1", "r:3"] and seen.foreign_ids() == [f"ck1:r:2:0:{RUN}"]
    model.apply(seen, f"ck1:r:4:0:{RUN}")  # application 6: r:1 touched at 4, within 3-6: it spills
    assert list(seen.marks) == ["r:1", "r:3"] and seen.foreign_ids() == [f"ck1:r:2:0:{RUN}", f"ck1:r:4:0:{RUN}"]
    assert model.check(seen, f"ck1:r:2:0:{RUN}") and not model.check(seen, f"ck1:r:0:0:{RUN}")


@pytest.mark.parametrize(
    "data",
    [
        {"applied": 1, "marks": [["r:0", 2, 1, 1, []]], "foreign": []},  # lo > hi
        {"applied": 1, "marks": [["r:0", 0, 1, 2, []]], "foreign": []},  # touched after the last application
        {"applied": 3, "marks": [["r:0", 0, 1, 3, [[2, [5, 4]]]]], "foreign": []},  # unsorted
        {"applied": 3, "marks": [["r:0", 0, 1, 3, [[2, [5, 5]]]]], "foreign": []},  # repeated
        {"applied": 3, "marks": [["r:0", 0, 1, 3, [[1, [5]], [2, [5]]]]], "foreign": []},  # in two blocks
        {"applied": 3, "marks": [["r:0", 0, 5, 3, [[1, [4]]]]], "foreign": []},  # inside the range
        {"applied": 3, "marks": [["r:0", 2, 5, 3, [[1, [6]]]]], "foreign": []},  # next to it: hi + 1 is applied
        {"applied": 3, "marks": [["r:0", 2, 5, 3, [[1, [1]]]]], "foreign": []},
        {"applied": 3, "marks": [["r:0", 0, 1, 3, [[5]]]], "foreign": []},  # a block without its stamp
        {"applied": 3, "marks": [["r:0", 0, 1, 3, [5]]], "foreign": []},
        {"applied": 3, "marks": [["r:0", 0, 1, 2, [[3, [5]]]]], "foreign": []},  # stamped after the mark
        {"applied": 3, "marks": [["r:0", 0, 1, 3, [[2, [5]], [1, [7]]]]], "foreign": []},  # out of order
        {"applied": 3, "marks": [["r:0", 0, 1, 3, [[2, [5]], [2, [7]]]]], "foreign": []},
        {"applied": 3, "marks": [["r:0", 0, 1, 3, [[2, list(range(3, 3 + 2 * 257, 2))]]]], "foreign": []},  # > BLOCK
        {"applied": 1, "marks": [["r:0", 0, 0, 1, 0, []]], "foreign": []},  # schema 7's old shape
        {"applied": 1, "marks": [["nope", 0, 0, 1, []]], "foreign": []},  # not a producer
        {"applied": 1, "marks": [["r:0", 0, 0, 1, []], ["r:0", 1, 1, 1, []]], "foreign": []},  # twice
        {"applied": 1, "marks": [["r:0", -1, 0, 1, []]], "foreign": []},
        {"applied": True, "marks": [], "foreign": []},
        {"applied": 2, "marks": [], "foreign": ["a", "a"]},
        {"applied": 2, "marks": [], "foreign": [1]},
    ],
)
def test_a_dedup_state_remember_could_not_have_made_is_refused(data: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="dedup state|foreign"):
        Seen.of_data(data, RUN)
