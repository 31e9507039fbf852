"""Attack on the fast paths that look a completion's or a re-check's path up as an outstanding key first
(core/lifecycle.py `_settle`, `deletion_problem`; service/partition.py `deletions_settled` has the same
look, `owed`'s): a path that is an outstanding key but reported for another eviction, another spelling of
one, another run's key, a kept key, a retried completion. Each settles exactly what it did before the
fast paths (this module passes on 0d45ccd's tree too), and a dormant run answers as a built one.
"""

from __future__ import annotations

from typing import Any

import pytest

from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.core.lifecycle import deletion_problem, owed
from ckptlog.processor.core.snapshot import decode, encode, of_fold
from tests import factories as f

ROOT = "file:///d"
A, B, C = f"{ROOT}/r/a", f"{ROOT}/r/b", f"{ROOT}/r/c"
OTHER = f"{ROOT}/r2/x"


def _fold() -> Fold:
    """r keeps c and owes a (eviction 0) and b (eviction 1); r2 keeps x and owes y (eviction 0)."""
    fold = Fold(FoldSettings(default_root=ROOT), track_changes=True)
    lines = [
        f.started("r", f"{ROOT}/r", keep=1),
        f.report("r", {}, A),
        f.report("r", {}, B),
        f.report("r", {}, C),
        f.started("r2", f"{ROOT}/r2", keep=1),
        f.report("r2", {}, f"{ROOT}/r2/y"),
        f.report("r2", {}, OTHER),
    ]
    for line in lines:
        assert fold.apply(f.event(line)).rejection is None, line
    assert {k: e.eviction for k, e in fold.runs["r"].outstanding.items()} == {A: 0, B: 1}
    return fold


def _restored(dormant: bool) -> Fold:
    snap = decode(encode(of_fold(_fold(), "t", 0, 9)))
    if not dormant:
        for run in snap.runs.values():
            assert run.report_count >= 0
    return Fold(snap.settings, snap.runs, track_changes=True)


def _owed(fold: Fold) -> dict[str, dict[str, int]]:
    return {run_id: {k: e.eviction for k, e in run.outstanding.items()} for run_id, run in fold.runs.items()}


def _deleted(effects: Any) -> list[str]:
    return [p for o in effects.outputs for p in o.data.get("checkpoint_paths", ())]


SETTLES: dict[str, tuple[bytes, list[str], dict[str, dict[str, int]]]] = {
    # a completion: (the event, the paths it reports deleted, what is still owed after it)
    "its key and eviction": (f.settled("r", [(A, 0)]), [A], {"r": {B: 1}, "r2": {f"{ROOT}/r2/y": 0}}),
    "its key, another eviction's number": (
        f.settled("r", [(A, 1)]),
        [],
        {"r": {A: 0, B: 1}, "r2": {f"{ROOT}/r2/y": 0}},
    ),
    "its key, a number not owed": (f.settled("r", [(B, 7)]), [], {"r": {A: 0, B: 1}, "r2": {f"{ROOT}/r2/y": 0}}),
    "another spelling of its key": (
        f.settled("r", [(f"{ROOT}/r//a/", 0)]),
        [f"{ROOT}/r//a/"],
        {"r": {B: 1}, "r2": {f"{ROOT}/r2/y": 0}},
    ),
    "another run's key, that run's number": (
        f.settled("r", [(f"{ROOT}/r2/y", 0)]),
        [],
        {"r": {A: 0, B: 1}, "r2": {f"{ROOT}/r2/y": 0}},
    ),
    "a kept key": (f.settled("r", [(C, 2)]), [], {"r": {A: 0, B: 1}, "r2": {f"{ROOT}/r2/y": 0}}),
    "an unsafe spelling": (
        f.settled("r", [(f"{ROOT}/r/x/../a", 0)]),
        [],
        {"r": {A: 0, B: 1}, "r2": {f"{ROOT}/r2/y": 0}},
    ),
    "a v1 completion (no number)": (f.deleted("r", B), [B], {"r": {A: 0}, "r2": {f"{ROOT}/r2/y": 0}}),
}


@pytest.mark.parametrize("dormant", [True, False], ids=["dormant", "built"])
@pytest.mark.parametrize("case", sorted(SETTLES))
def test_a_completion_settles_exactly_the_eviction_it_names(case: str, dormant: bool) -> None:
    raw, deleted, left = SETTLES[case]
    fold = _restored(dormant)
    effects = fold.apply(f.event(raw))
    assert effects.rejection is None and _deleted(effects) == deleted, case
    assert _owed(fold) == left, case
    again = fold.apply(f.event(f.settled("r", [(A, 0)], event_id="retry")))
    retried = fold.apply(f.event(f.settled("r", [(A, 0)], event_id="retry-2")))
    assert _deleted(retried) == [] and A not in fold.runs["r"].outstanding, "a retried completion settles nothing"
    assert again.rejection is None


PROBLEMS: dict[str, tuple[str, str, str | None]] = {
    # a re-check: (run, path, the start of its problem; None: owed)
    "its key": ("r", A, None),
    "another spelling of its key": ("r", f"{ROOT}/r//a", None),
    "a kept key": ("r", C, "it is live again"),
    "another spelling of a kept key": ("r", f"{ROOT}/r/./c", "it is live again"),
    "another run's owed key": ("r", f"{ROOT}/r2/y", "the run no longer owes"),
    "its own key asked of another run": ("r2", A, "the run no longer owes"),
    "an unsafe spelling": ("r", f"{ROOT}/r/x/../a", "unsafe path"),
    "the run's root": ("r", f"{ROOT}/r", "the run no longer owes"),
}


@pytest.mark.parametrize("dormant", [True, False], ids=["dormant", "built"])
@pytest.mark.parametrize("case", sorted(PROBLEMS))
def test_the_recheck_owes_exactly_the_evictions_outstanding(case: str, dormant: bool) -> None:
    run_id, path, problem = PROBLEMS[case]
    fold = _restored(dormant)
    why = deletion_problem(fold.runs[run_id], path)
    assert (why is None) if problem is None else (why is not None and why.startswith(problem)), (case, why)
    found = owed(fold.runs[run_id], path)
    assert (found is not None) == (problem is None), (case, found)
