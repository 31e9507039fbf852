"""`Fold.rollback_last` undoes exactly the last `apply`: also when that apply returned before
changing anything (a duplicate, a rejection), in which case there is nothing to undo. Before,
such an apply left the journal of the event before it in place, and rolling back undid that one."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from ckptlog.processor.core import Fold
from ckptlog.processor.core.snapshot import encode, of_fold
from tests import factories as f
from tests.unit.core.test_fold_properties import PROFILE, SETTINGS, logs


def state(fold: Fold) -> bytes:
    return encode(of_fold(fold, "t", 0, 0))


@PROFILE
@given(logs(), st.data())
def test_rollback_last_restores_the_state_before_the_last_apply(lines: list[bytes], data: st.DataObject) -> None:
    fold = Fold(SETTINGS)
    for raw in lines:
        fold.apply(f.event(raw))
    assume(lines)
    again = data.draw(st.sampled_from(lines))  # applied before: a duplicate, a rejection, or (rarely) news
    before = state(fold)
    fold.apply(f.event(again))
    fold.rollback_last()
    assert state(fold) == before


def test_a_duplicate_rolled_back_leaves_the_report_before_it() -> None:
    fold = Fold(SETTINGS)
    first, second = f.report("a", {"acc": 0.5}, "file:///data/a/c0"), f.report("a", {"acc": 0.7}, "file:///data/a/c1")
    for raw in (first, second):
        fold.apply(f.event(raw))
    before = state(fold)
    assert fold.apply(f.event(second)).duplicate
    fold.rollback_last()
    assert state(fold) == before and len(fold.runs["a"].checkpoints) == 2
