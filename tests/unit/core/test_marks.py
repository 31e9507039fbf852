"""A producer's out-of-order numbers in blocks (ckptlog/processor/core/marks.py, contract §3
"Deduplication"): the dropping boundary (an id applied exactly W applications ago is known; with
blocks of one number, one applied W + 1 ago is not) and the undo of every block operation, down
to the blocks' inner layout (offsets or 8-byte numbers, bases, stamps)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptlog.processor.core import marks
from ckptlog.processor.core.dedup import Seen
from tests.unit.core.test_dedup import PROFILE, RUN, Model

EVALUATOR = "v:ckptlog.events:0:1"


def layout(seen: Seen) -> list[Any]:
    """Every mark's fields and blocks as laid out in memory (what `data()` does not show)."""
    return [
        (
            p,
            m.lo,
            m.hi,
            m.stamp,
            None if m.blocks is None else [(b.base, b.ids.typecode, list(b.ids), b.stamp) for b in m.blocks],
        )
        for p, m in seen.marks.items()
    ]


def result(offset: int) -> str:
    return f"ck1:{EVALUATOR}:{offset}:{RUN}"


@PROFILE
@given(
    st.integers(1, 8),
    st.integers(1, 4),
    st.lists(st.tuples(st.integers(2, 5), st.booleans()), min_size=1, max_size=60),
)
def test_an_id_applied_exactly_w_applications_ago_is_known(
    window: int, block: int, steps: list[tuple[int, bool]]
) -> None:
    """Sparse results (always out of order) between in-order reports: after every application the
    id applied W applications ago is known; with blocks of one, the one before it no longer is once
    an insertion dropped its block."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(marks, "BLOCK", block)
        model, seen, offset, report, first = Model(window), Seen(), 0, 0, None
        for gap, is_result in steps:
            if is_result:
                offset += gap
                first = first or result(offset)  # the mark's range: known for good
                model.apply(seen, result(offset))
            else:
                model.apply(seen, f"ck1:r:0:{report}:{RUN}")
                report += 1
            if len(model.applied) >= window:
                assert model.check(seen, model.applied[-window])
            older = model.applied[-window - 1] if len(model.applied) > window else None
            if block == 1 and is_result and older is not None and older.startswith(f"ck1:{EVALUATOR}:"):
                assert model.check(seen, older) == (older == first)


def test_a_block_of_one_drops_at_the_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(marks, "BLOCK", 1)
    model, seen = Model(3), Seen()
    for n in range(1, 8):
        model.apply(seen, result(10 * n))  # 10 starts the range; 20, 30, ... out of order
    # applications 1-7; the last 3 are 50, 60, 70; 40 (application 4) was dropped at 7
    assert [seen.known(result(10 * n), RUN) for n in range(1, 8)] == [True, False, False, False, True, True, True]
    assert [b.numbers() for b in seen.marks[EVALUATOR].blocks or ()] == [[50], [60], [70]]


SEQS = st.one_of(st.integers(0, 30), st.integers(0, 30), st.sampled_from([2**32, 2**33 + 5, 10**17, 10**18 - 1]))


@PROFILE
@given(st.lists(SEQS, min_size=1, max_size=80), st.integers(1, 6), st.integers(1, 4))
def test_every_block_operation_is_undone_to_the_same_layout(seqs: list[int], window: int, block: int) -> None:
    """Each remember (listing, opening, inserting into, widening, dropping blocks, absorbing from
    them into the range) undone from its journal leaves the marks laid out as before, and done
    again as a twin that was never undone; and it is a state a snapshot may hold (numbers outside
    the range and not next to it, blocks in application order)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(marks, "BLOCK", block)
        model, seen, twin = Model(window), Seen(), Seen()
        for seq in seqs:
            event_id = f"ck1:r:0:{seq}:{RUN}"
            if model.check(seen, event_id):
                continue
            before = layout(seen), seen.applied, seen.expect
            journal = model.apply(seen, event_id)
            for entry in reversed(journal):
                seen.undo(entry)
            assert (layout(seen), seen.applied, seen.expect) == before
            seen.remember(event_id, RUN, window, [].append)
            twin.remember(event_id, RUN, window, [].append)
            assert layout(seen) == layout(twin)
            assert Seen.of_data(seen.data(), RUN).data() == seen.data()  # a state the checks accept


def test_a_block_spanning_2_32_holds_8_byte_numbers_and_undoes_to_offsets() -> None:
    seen, journal = Seen(), list[tuple[Any, ...]]()
    for seq in (0, 5, 9):
        seen.remember(f"ck1:r:0:{seq}:{RUN}", RUN, 64, journal.append)
    block = (seen.marks["r:0"].blocks or [])[0]
    assert block.ids.typecode == "I" and block.numbers() == [5, 9]
    journal.clear()
    seen.remember(f"ck1:r:0:{2**40}:{RUN}", RUN, 64, journal.append)
    assert block.ids.typecode == "q" and block.numbers() == [5, 9, 2**40]
    assert all(seen.known(f"ck1:r:0:{s}:{RUN}", RUN) for s in (0, 5, 9, 2**40))
    assert not any(seen.known(f"ck1:r:0:{s}:{RUN}", RUN) for s in (1, 6, 2**40 - 1, 2**40 + 1, 2**32 + 5))
    for entry in reversed(journal):
        seen.undo(entry)
    assert block.ids.typecode == "I" and block.numbers() == [5, 9]


def test_a_gap_closing_takes_numbers_from_every_block_into_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 2 in application order: 4 6 | 3 5 | 8: 2 closes the gap to 0-1 and takes 3-6 in,
    from two blocks; 7 then takes 8; undone, each block is as it was."""
    monkeypatch.setattr(marks, "BLOCK", 2)
    seen = Seen()
    for seq in (0, 1, 4, 6, 3, 5, 8):
        seen.remember(f"ck1:r:0:{seq}:{RUN}", RUN, 64, [].append)
    mark = seen.marks["r:0"]
    assert [b.numbers() for b in mark.blocks or ()] == [[4, 6], [3, 5], [8]] and (mark.lo, mark.hi) == (0, 1)
    before, journal = layout(seen), list[tuple[Any, ...]]()
    seen.remember(f"ck1:r:0:2:{RUN}", RUN, 64, journal.append)
    assert (mark.lo, mark.hi) == (0, 6) and [b.numbers() for b in mark.blocks or ()] == [[], [], [8]]
    seen.remember(f"ck1:r:0:7:{RUN}", RUN, 64, journal.append)
    assert (mark.lo, mark.hi) == (0, 8) and not mark.numbers() and seen.expect == f"ck1:r:0:9:{RUN}"
    assert all(seen.known(f"ck1:r:0:{s}:{RUN}", RUN) for s in range(9)) and not seen.known(f"ck1:r:0:9:{RUN}", RUN)
    for entry in reversed(journal):
        seen.undo(entry)
    assert layout(seen) == before


@pytest.mark.parametrize("span", [0, 1, 2**32 - 3, 2**32 - 2, 2**32 - 1, 2**32, 10**18 - 5])
def test_a_restored_block_holds_its_numbers_whatever_they_span(span: int) -> None:
    """A snapshot's block is laid out anew: offsets from a centred base while they fit in 4 bytes."""
    numbers = sorted({0, span // 3, span})
    seen = Seen.of_data(
        {"applied": 2, "marks": [["r:0", 10**18 - 3, 10**18 - 3, 2, [[1, numbers]]]], "foreign": []}, RUN
    )
    block = (seen.marks["r:0"].blocks or [])[0]
    assert block.numbers() == numbers and block.ids.itemsize == (4 if span < 2**32 - 1 else 8)
    assert all(seen.known(f"ck1:r:0:{n}:{RUN}", RUN) for n in numbers)


@pytest.mark.from_source  # it replaces the fold's functions: against the sources (tests/compiled.py)
@pytest.mark.parametrize(
    ("site", "seqs"),
    [
        *[(site, (0, 1, 4, 6, 3, 5, 8, 2)) for site in ("bisect_right", "Block", "array", "bisect_left")],
        *[(site, (0, 2, 4, 6, 8, 10)) for site in ("Block", "array", "bisect_left")],  # opening, trimming
        *[(site, (0, 5, 2**40, 2**41)) for site in ("Block", "array", "bisect_left")],  # widening
    ],
)
def test_a_fault_part_way_is_undone_from_the_journal(
    monkeypatch: pytest.MonkeyPatch, site: str, seqs: tuple[int, ...]
) -> None:
    """A fault at any call of `site` while a number is remembered (absorbing across blocks, opening,
    widening or trimming one, inserting): what was pushed, undone, leaves the layout as before."""
    monkeypatch.setattr(marks, "BLOCK", 2)
    real, faults = getattr(marks, site), 0
    for n in range(1, 8):
        seen, calls = Seen(), [0]

        def faulty(*args: Any, calls: list[int] = calls, n: int = n) -> Any:
            calls[0] += 1
            if calls[0] == n:
                raise RuntimeError("injected")
            return real(*args)

        for seq in seqs:
            event_id, journal = f"ck1:r:0:{seq}:{RUN}", list[tuple[Any, ...]]()
            before = layout(seen), seen.applied, seen.expect
            monkeypatch.setattr(marks, site, faulty)
            try:
                seen.remember(event_id, RUN, 3, journal.append)
            except RuntimeError:
                faults, calls[0] = faults + 1, -100  # one fault per stream
                for entry in reversed(journal):
                    seen.undo(entry)
                assert (layout(seen), seen.applied, seen.expect) == before
                monkeypatch.setattr(marks, site, real)
                seen.remember(event_id, RUN, 3, [].append)
            monkeypatch.setattr(marks, site, real)
    assert faults
