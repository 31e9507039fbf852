"""SortedRecords against a plain sorted list, in both layouts (small lists and blocks)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlog.processor.core import ordering
from ckptlog.processor.core.ordering import SortedRecords
from ckptlog.processor.core.state import CheckpointRecord

values = st.sampled_from([-math.inf, -1.0, 0.0, 0.5, 1.0, math.inf])
ops = st.lists(st.tuples(st.sampled_from(["add", "add", "remove", "pop"]), st.booleans(), values), max_size=120)


def _record(index: int, has: bool, value: float) -> CheckpointRecord:
    key = (has, value if has else -math.inf, index)
    return CheckpointRecord(f"file:///r/c{index}", f"file:///r/c{index}", {}, index, "COMMITTED", None, key)


@pytest.fixture(params=[(ordering.PROMOTE_AT, ordering.BLOCK), (3, 4)], ids=["default", "tiny-blocks"])
def layout(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    promote, block = request.param
    monkeypatch.setattr(ordering, "PROMOTE_AT", promote)
    monkeypatch.setattr(ordering, "BLOCK", block)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=ops)
def test_matches_a_sorted_list(layout: None, steps: list[tuple[str, bool, float]]) -> None:
    kept, reference = SortedRecords(), []
    for index, (op, has, value) in enumerate(steps):
        if op == "add" or not reference:
            record = _record(index, has, value)
            kept.add(record)
            reference.append(record)
        else:  # remove one picked by the step's shape, anywhere in the order
            at = index % len(reference)
            victim = sorted(reference, key=lambda r: r.sort_key)[at]
            if op == "remove":
                kept.remove(victim)
            else:
                kept.pop(at)
            reference.remove(victim)
        expected = sorted(reference, key=lambda r: r.sort_key)
        assert list(kept) == expected
        assert len(kept) == len(expected)
        assert kept.last() is (expected[-1] if expected else None)
        assert kept.head(2) == expected[:2]


def test_real_minus_infinity_ranks_above_no_score(layout: None) -> None:
    kept = SortedRecords()
    scored, unscored = _record(0, True, -math.inf), _record(1, False, 0.0)
    for record in [scored, unscored] + [_record(i, True, 1.0) for i in range(2, 8)]:
        kept.add(record)
    assert list(kept)[:2] == [unscored, scored]


def test_removing_an_absent_record_is_an_error(layout: None) -> None:
    kept = SortedRecords()
    for i in range(6):
        kept.add(_record(i, True, float(i)))
    with pytest.raises(ValueError, match="not in the kept list"):
        kept.remove(_record(99, True, 2.0))
