"""Finished records expire (contract §3 "Finished runs", *Expiry*): the newest `finished_runs_kept`
retired runs keep their record (id, root), the oldest leave first, and an expired run is unknown
to the fold again. Adversarial cases first, then properties: deterministic, journaled, and the
same after a snapshot and restore as in one straight fold."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ckptlog.events.rejections import Reason
from ckptlog.processor.core import Fold
from ckptlog.processor.core.snapshot import SCHEMA_VERSION, decode, encode, of_fold
from tests import factories as f
from tests.unit.core.test_finished_runs import _reencode, _run
from tests.unit.core.test_fold_properties import PROFILE, ROOT, SETTINGS

KEEP2 = dataclasses.replace(SETTINGS, finished_runs_kept=2)


def root(run: str) -> str:
    return f"{ROOT}/{run}"


def finish(fold: Fold, run: str, checkpoints: int = 1) -> None:
    """Start `run` under its own root, report checkpoints, finish it (nothing owed: it retires)."""
    lines = [f.started(run, root(run), event_id=f"{run}-s")]
    lines += [f.report(run, {}, f"{root(run)}/c{i}", event_id=f"{run}-r{i}") for i in range(checkpoints)]
    for raw in [*lines, f.finished(run, event_id=f"{run}-f")]:
        assert fold.apply(f.event(raw)).rejection is None
    assert run not in fold.runs


def state(fold: Fold) -> bytes:
    return encode(of_fold(fold, "t", 0, 0))


def restored(fold: Fold) -> Fold:
    snap = decode(state(fold))
    return Fold(snap.settings, snap.runs, refused=snap.refused, finished=snap.finished, retired=snap.retired)


def test_the_oldest_record_expires_first_and_its_root_is_unregistered() -> None:
    fold = Fold(KEEP2)
    for run in ("a", "b", "c"):
        finish(fold, run)
    assert list(fold.finished) == ["b", "c"]  # retirement order: the oldest first
    assert root("a") not in fold.roots.owners and fold.roots.owners[root("b")] == "b"
    finish(fold, "d")
    assert list(fold.finished) == ["c", "d"] and root("b") not in fold.roots.owners


def test_a_forgotten_run_counts_as_a_retirement_and_zero_keeps_no_record() -> None:
    fold = Fold(KEEP2)
    finish(fold, "a")
    assert fold.apply(f.event(f.started("b", root("b")))).rejection is None
    assert fold.apply(f.event(f.forgotten("b"))).rejection is None
    finish(fold, "c")
    assert list(fold.finished) == ["b", "c"]
    none = Fold(dataclasses.replace(SETTINGS, finished_runs_kept=0))
    finish(none, "a")
    assert none.finished == {} and not none.roots.owners and "a" in none.leaving  # its final VIEW is published


def test_a_late_event_of_an_expired_run_is_told_what_an_unknown_run_is_told() -> None:
    fold = Fold(KEEP2)
    for run in ("a", "b", "c"):
        finish(fold, run)
    recorded = fold.apply(f.event(f.report("b", {}, f"{root('b')}/late"))).rejection
    assert recorded is not None and recorded.reason == Reason.RUN_FINISHED  # b still has its record
    again = fold.apply(f.event(f.finished("a")))  # a repeated finish: nothing to finish, nothing remembered
    assert [o.data["code"] for o in again.outputs] == ["finish_unknown_run"] and "a" not in fold.finished
    late = fold.apply(f.event(f.result("a", f"{root('a')}/c0")))
    assert [o.data["code"] for o in late.outputs] == ["not_pending"]
    assert fold.apply(f.event(f.settled("a", deleted=[(f"{root('a')}/c0", 0)]))).rejection is None
    assert "a" not in fold.runs
    # a late report creates an implicit run, under {--storage-root}/{run id}, as for any unknown run
    assert fold.apply(f.event(f.report("a", {}, f"{root('a')}/c0", event_id="a-r0"))).rejection is None
    run = fold.runs["a"]
    assert run.started is None and run.storage_root == root("a") and run.report_count == 1


def test_a_reused_run_id_after_expiry_is_a_new_run_and_before_it_is_refused() -> None:
    fold = Fold(KEEP2)
    finish(fold, "a")
    refused = fold.apply(f.event(f.started("a", root("a"), event_id="a-s2"))).rejection
    assert refused is not None and refused.reason == Reason.RUN_FINISHED
    finish(fold, "b")
    finish(fold, "c")
    assert fold.apply(f.event(f.started("a", root("a"), keep=3, event_id="a-s2"))).rejection is None
    assert fold.runs["a"].config.num_to_keep == 3 and fold.runs["a"].report_count == 0


def test_a_root_nesting_with_an_expired_root_is_accepted_by_the_fold_only_after_expiry() -> None:
    """The fold no longer sees the expired root; the claim in storage guards it (contract §9:
    tests/unit/test_attack_expired_roots.py)."""
    fold = Fold(KEEP2)
    finish(fold, "a")
    for run, where in (("inside", f"{root('a')}/x"), ("equal", root("a"))):
        early = fold.apply(f.event(f.started(run, where))).rejection
        assert early is not None and early.reason == Reason.UNSAFE_STORAGE_ROOT
    finish(fold, "b")
    finish(fold, "c")
    assert fold.apply(f.event(f.started("inside", f"{root('a')}/x"))).rejection is None
    nested = fold.apply(f.event(f.started("equal", root("a")))).rejection
    assert nested is not None and nested.reason == Reason.UNSAFE_STORAGE_ROOT  # nests with `inside` now


def test_an_expiring_retirement_is_all_or_nothing() -> None:
    fold = Fold(KEEP2)
    finish(fold, "a")
    finish(fold, "b")
    for raw in (f.started("c", root("c")), f.report("c", {}, f"{root('c')}/c0")):
        fold.apply(f.event(raw))
    before, owners = state(fold), dict(fold.roots.owners)
    fold.apply(f.event(f.finished("c")))
    assert list(fold.finished) == ["b", "c"]
    fold.rollback_last()
    assert state(fold) == before and list(fold.finished) == ["a", "b"] and fold.roots.owners == owners
    fold.apply(f.event(f.finished("c")))
    assert list(fold.finished) == ["b", "c"]


def test_a_schema_4_snapshot_with_more_records_restores_with_the_newest() -> None:
    """Schema 4 had no bound: its table is cut to the newest records, as a fold under the bound holds."""
    unbounded = Fold(dataclasses.replace(SETTINGS, finished_runs_kept=100))
    for run in ("a", "b", "c"):
        finish(unbounded, run)
    body = json.loads(state(unbounded))["snapshot"]
    del body["settings"]["finished_runs_kept"], body["retired"]  # schema 5 added the one, 6 the other
    snap = decode(_reencode(body, 4))
    assert snap.settings.finished_runs_kept == 10_000 and list(snap.finished) == ["a", "b", "c"]
    back = Fold(KEEP2, snap.runs, refused=snap.refused, finished=snap.finished, retired=snap.retired)
    straight = Fold(KEEP2)
    for run in ("a", "b", "c"):
        finish(straight, run)
    assert list(back.finished) == ["b", "c"] and back.roots.owners == straight.roots.owners
    assert not back.retired and list(straight.retired) == ["b", "c"]  # schema 4 kept no state to reopen
    straight.retired.clear()
    assert state(back) == state(straight)
    assert json.loads(state(back))["schema_version"] == SCHEMA_VERSION == 7


# -- properties -----------------------------------------------------------------------------

RUNS = ["a", "b", "c", "d"]
ROOTS = [f"{ROOT}/{{run}}", f"{ROOT}/shared", f"{ROOT}/a/inner", f"{ROOT}/{{run}}/deep"]


@st.composite
def churn(draw: Any) -> list[bytes]:
    """Runs started (under their own, a shared or a nested root), reported, finished, forgotten,
    settled, reopened and started again, with ids reused: what expiry must keep deterministic. Settlements are
    made concrete by folding as the log is drawn (they name the evictions the fold owes)."""
    scratch, lines = Fold(KEEP2), []
    for step in range(draw(st.integers(1, 40))):
        kind, run = (
            draw(st.sampled_from(["start", "report", "report", "finish", "forget", "settle", "reopen"])),
            draw(st.sampled_from(RUNS)),
        )
        if kind == "start":
            where = draw(st.sampled_from(ROOTS)).format(run=run)
            raw = f.started(run, where, keep=draw(st.sampled_from([None, 1])), event_id=f"s-{run}-{where}")
        elif kind == "report":
            held = scratch.runs.get(run)
            base = held.storage_root if held is not None and held.storage_root else root(run)
            raw = f.report(run, {}, f"{base}/c{draw(st.integers(0, 3))}", event_id=f"r-{step}")
        elif kind == "finish":
            raw = f.finished(run, draw(st.sampled_from([None, "best"])), event_id=f"f-{run}-{step}")
        elif kind == "forget":
            raw = f.forgotten(run, event_id=f"g-{step}")
        elif kind == "reopen":  # contract §3 "Reopened runs": a retired state comes back, a record goes
            raw = f.reopened(run, event_id=f"o-{step}")
        else:
            owed = [(d.path, d.eviction) for d in scratch.owed() if d.run_id == run]
            if not owed:
                continue
            raw = f.settled(run, deleted=owed, event_id=f"d-{step}")
        scratch.apply(f.event(raw))
        lines.append(raw)
    return lines


@PROFILE
@given(churn(), st.integers(0, 40))
def test_restore_before_or_after_expiry_equals_one_straight_fold(lines: list[bytes], cut: int) -> None:
    cut = min(cut, len(lines))
    whole = Fold(KEEP2)
    whole_trace = _run(lines, whole)
    first = Fold(KEEP2)
    first_trace = _run(lines[:cut], first)
    resumed = restored(first)
    assert first_trace + _run(lines[cut:], resumed) == whole_trace
    assert state(resumed) == state(whole) and list(resumed.finished) == list(whole.finished)
    assert resumed.roots.owners == whole.roots.owners


@PROFILE
@given(churn())
def test_records_stay_bounded_registered_and_rolled_back_exactly(lines: list[bytes]) -> None:
    fold = Fold(KEEP2)
    for raw in lines:
        before, order, owners = state(fold), list(fold.finished), dict(fold.roots.owners)
        effects = fold.apply(f.event(raw))
        assert len(fold.finished) <= 2
        for run_id, where in fold.finished.items():
            assert run_id not in fold.runs and (not where or fold.roots.owners[where] == run_id)
        held = {r.root for r in fold.runs.values() if r.storage_root} | {w for w in fold.finished.values() if w}
        assert set(fold.roots.owners) == held  # an expired root is registered no more, nothing else is lost
        after = state(fold)
        if effects.rejection is not None or effects.duplicate or after == before:
            continue  # decided before anything changed (maybe before the journal began): nothing to roll back
        fold.rollback_last()
        assert state(fold) == before and list(fold.finished) == order and fold.roots.owners == owners
        fold.apply(f.event(raw))
        assert state(fold) == after
