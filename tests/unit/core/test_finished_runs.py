"""Finished runs (contract §3 "Finished runs", §9): run_finished, the last retention, retirement
from the hot state, and what a late event is told. Adversarial cases first, then properties."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptlog.errors import SnapshotVersionError
from ckptlog.events.rejections import Reason
from ckptlog.events.view import RunView
from ckptlog.processor.core import Fold, run_view
from ckptlog.processor.core.lifecycle import deletion_problem
from ckptlog.processor.core.snapshot import SCHEMA_VERSION, decode, encode, of_fold
from tests import factories as f
from tests.unit.core.test_fold_properties import PROFILE, ROOT, SETTINGS, logs

A = f"{ROOT}/a"


def fold_of(*lines: bytes, fold: Fold | None = None) -> Fold:
    fold = fold or Fold(SETTINGS)
    for raw in lines:
        fold.apply(f.event(raw))
    return fold


def restored(fold: Fold) -> Fold:
    snap = decode(encode(of_fold(fold, "t", 0, 0)))
    return Fold(snap.settings, snap.runs, refused=snap.refused, finished=snap.finished, retired=snap.retired)


def state(fold: Fold) -> bytes:
    return encode(of_fold(fold, "t", 0, 0))


def five(keep: int | None = 2, validation: bool = False) -> list[bytes]:
    """Run a: started, five checkpoints scored 0..4 (c4 the best and the latest)."""
    reports = [f.report("a", {"acc": i}, f"{A}/c{i}", validation=validation, event_id=f"r{i}") for i in range(5)]
    return [f.started("a", A, keep=keep, attr="acc", event_id="start"), *reports]


def test_finish_without_owed_deletions_retires_the_run_keeping_its_root_and_final_view() -> None:
    fold = fold_of(*five(keep=None))
    effects = fold.apply(f.event(f.finished("a")))
    assert effects.rejection is None and not effects.deletions
    assert "a" not in fold.runs and fold.finished == {"a": A}
    view = run_view(fold.leaving["a"])  # what the processor publishes: the final VIEW, marked
    assert view["finished"] is True and [c["path"] for c in view["checkpoints"]] == [f"{A}/c{i}" for i in range(5)]
    assert RunView.model_validate(view).finished is True
    assert fold.roots.owners[A] == "a"


def test_keep_best_evicts_all_but_the_best_latest_and_pending() -> None:
    lines = [*five(keep=None), f.report("a", {"acc": -1}, f"{A}/late", validation=True, event_id="late")]
    fold = fold_of(*lines)
    effects = fold.apply(f.event(f.finished("a", "best")))
    assert sorted(d.path for d in effects.deletions) == [f"{A}/c{i}" for i in range(4)]
    run = fold.runs["a"]  # owes deletions: still hot
    assert {c.path for c in run.checkpoints} == {f"{A}/c4", f"{A}/late"}  # best; latest and pending
    assert run.finished == "best"


def test_finish_with_pending_validation_refuses_its_result_and_never_deletes_it() -> None:
    fold = fold_of(*five(keep=1, validation=True))
    fold.apply(f.event(f.finished("a", "best")))
    run = fold.runs.get("a") or fold.leaving["a"]
    assert len(run.pending) == 5 and run.validated == 0
    effects = fold.apply(f.event(f.result("a", f"{A}/c0", "VALIDATED", {"acc": 9})))
    assert effects.rejection is not None and effects.rejection.reason == Reason.RUN_FINISHED
    assert run.checkpoints and all(c.status == "PENDING_VALIDATION" for c in run.checkpoints)


def test_events_after_finish_are_refused_hot_and_retired() -> None:
    fold = fold_of(*five(keep=2), f.finished("a"))
    assert "a" in fold.runs  # c0..c2 still owed
    dup = fold.apply(f.event(f.report("a", {"acc": 0}, f"{A}/c0", event_id="r0")))
    assert dup.duplicate  # a redelivery of an applied event is still a no-op while the run is hot
    for raw in (f.report("a", {"acc": 1}, f"{A}/x"), f.restart("a"), f.report("a", {"loss": 1})):
        rejection = fold.apply(f.event(raw)).rejection
        assert rejection is not None and rejection.reason == Reason.RUN_FINISHED
        assert "run 'a' has finished" in rejection.message
    assert fold.apply(f.event(f.finished("a", "best"))).deletions == ()  # a repeated finish: nothing
    settle = f.settled("a", deleted=[(f"{A}/c{i}", i) for i in range(3)])
    fold.apply(f.event(settle))
    assert "a" not in fold.runs and "a" in fold.finished
    late = fold.apply(f.event(f.report("a", {"acc": 0}, f"{A}/c0", event_id="r0")))  # retired: told why
    assert late.rejection is not None and late.rejection.reason == Reason.RUN_FINISHED
    assert fold.apply(f.event(settle)).rejection is None  # a repeated settlement: nothing
    assert fold.apply(f.event(f.finished("a"))).rejection is None


def test_finish_during_outstanding_deletions_then_restore_redrives_them() -> None:
    fold = fold_of(*five(keep=2), f.finished("a", "best"))
    owed = sorted((d.path, d.eviction) for d in fold.owed())
    assert owed == [(f"{A}/c{i}", i) for i in range(4)]
    back = restored(fold)
    assert sorted((d.path, d.eviction) for d in back.owed()) == owed and back.runs["a"].finished == "best"
    assert deletion_problem(back.runs["a"], f"{A}/c3") is None  # the deleter still may delete it
    assert deletion_problem(back.runs["a"], f"{A}/c4") is not None  # the best and latest: never
    lines = [f.settled("a", deleted=[(p, e)]) for p, e in owed]
    fold_of(*lines, fold=fold)
    fold_of(*lines, fold=back)
    assert state(back) == state(fold) and back.finished == {"a": A} and not back.runs


def test_refused_deletions_also_settle_and_retire() -> None:
    fold = fold_of(*five(keep=4), f.finished("a"))
    fold.apply(f.event(f.settled("a", refused=[(f"{A}/c0", 0, "permission denied")])))
    assert "a" not in fold.runs and fold.finished == {"a": A}


def test_a_new_run_cannot_reuse_a_finished_runs_id_or_nest_in_its_root() -> None:
    for settle in (False, True):
        fold = fold_of(*five(keep=4), f.finished("a"))
        if settle:
            fold = restored(fold_of(f.settled("a", deleted=[(f"{A}/c0", 0)]), fold=fold))
            assert "a" not in fold.runs
        again = fold.apply(f.event(f.started("a", f"{ROOT}/elsewhere"))).rejection
        assert again is not None and again.reason == Reason.RUN_FINISHED
        for root in (f"{A}/inner", A, ROOT):
            nested = fold.apply(f.event(f.started("b", root))).rejection
            assert nested is not None and "run 'a'" in nested.message, root
        assert fold.apply(f.event(f.started("c", f"{ROOT}/c"))).rejection is None


def test_an_implicit_run_nesting_in_a_finished_root_is_refused() -> None:
    fold = fold_of(f.report("a", {}, f"{A}/c0"), f.finished("a"))  # implicit root {ROOT}/a
    assert fold.finished == {"a": A}
    assert fold.apply(f.event(f.report("a", {}, f"{A}/c1"))).rejection is not None


def test_finish_of_an_unknown_run_warns_and_leaves_nothing() -> None:
    fold = Fold(SETTINGS)
    effects = fold.apply(f.event(f.finished("ghost")))
    assert [o.type for o in effects.outputs] == ["warning"] and not fold.runs and not fold.finished


def test_finish_is_all_or_nothing_on_a_fault() -> None:
    fold = fold_of(*five(keep=None))
    before = state(fold)
    fold.apply(f.event(f.finished("a", "best")))
    fold.rollback_last()
    assert state(fold) == before and fold.runs["a"].finished is None


def test_schema_3_snapshot_restores_and_older_is_refused() -> None:
    fold = fold_of(*five(keep=2))
    doc = json.loads(encode(of_fold(fold, "t", 0, 0)))
    assert doc["schema_version"] == SCHEMA_VERSION == 7
    body = doc["snapshot"]
    del body["settings"]["finished_runs_kept"]  # schema 5 added it
    del body["finished"], body["retired"]
    for run in body["runs"].values():
        del run["finished"], run["reopened"]
        run["seen"] = run.pop("dedup")["foreign"]  # schema 7 replaced the list of ids (all foreign here)
    old = _reencode(body, 3)
    back = decode(old)
    assert back.finished == {} and back.runs["a"].finished is None
    assert state(Fold(back.settings, back.runs)) == state(fold)
    with pytest.raises(SnapshotVersionError, match="ckptlog replay"):
        decode(_reencode(body, 2))


def _reencode(body: dict[str, Any], version: int) -> bytes:
    import hashlib

    from ckptlog.processor.core.snapshot import FORMAT, canonical

    digest = hashlib.sha256(canonical(body)).hexdigest()
    return canonical({"checksum": f"sha256:{digest}", "format": FORMAT, "schema_version": version, "snapshot": body})


# -- properties -----------------------------------------------------------------------------


@st.composite
def finishing_logs(draw: Any) -> list[bytes]:
    """The fold properties' logs with run_finished (either keep), run_forgotten and run_reopened
    inserted anywhere."""
    lines: list[bytes] = draw(logs())
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(lines)))
        run, keep = draw(st.sampled_from(["a", "b"])), draw(st.sampled_from([None, "kept", "best"]))
        what = draw(st.sampled_from(["finish", "finish", "forget", "reopen"]))
        if what == "finish":
            lines.insert(at, f.finished(run, keep, event_id=f"finish-{run}-{at}"))
        elif what == "forget":  # an operator's forget: refused while deletions are owed, else the run retires
            lines.insert(at, f.forgotten(run, event_id=f"forget-{run}-{at}"))
        else:  # contract §3 "Reopened runs": refused unless the run finished (and was not forgotten)
            lines.insert(at, f.reopened(run, event_id=f"reopen-{run}-{at}"))
    return lines


def _run(lines: list[bytes], fold: Fold) -> list[Any]:
    trace = []
    for raw in lines:
        e = fold.apply(f.event(raw))
        trace.append(
            ([(o.type, repr(o.data)) for o in e.outputs], [(d.path, d.eviction) for d in e.deletions], e.rejection)
        )
    return trace


@PROFILE
@given(finishing_logs(), st.integers(0, 60))
def test_finished_snapshot_restore_continue_equals_uninterrupted(lines: list[bytes], cut: int) -> None:
    cut = min(cut, len(lines))
    whole = Fold(SETTINGS)
    whole_trace = _run(lines, whole)
    first = Fold(SETTINGS)
    first_trace = _run(lines[:cut], first)
    resumed = restored(first)
    assert first_trace + _run(lines[cut:], resumed) == whole_trace
    assert state(resumed) == state(whole)


@PROFILE
@given(finishing_logs())
def test_finished_runs_never_delete_what_they_keep_and_change_only_by_settlement(lines: list[bytes]) -> None:
    fold = Fold(SETTINGS)
    for raw in lines:
        event = f.event(raw)
        run = fold.runs.get(event.subject)
        was_finished = event.subject in fold.finished or (run is not None and run.finished is not None)
        kept_before = {c.key for c in run.checkpoints} if run is not None else set()
        effects = fold.apply(event)
        now = fold.runs.get(event.subject) or fold.leaving.get(event.subject)
        if now is not None:
            protected = {c.path for c in now.checkpoints} | {c.path for c in now.pending.values()}
            assert not {d.path for d in effects.deletions} & protected
        if was_finished:
            assert not effects.deletions  # no eviction after the finish
            if run is not None and now is not None:
                assert {c.key for c in now.checkpoints} == kept_before
        for other in fold.runs.values():  # a run owing nothing and finished has left
            assert other.finished is None or other.outstanding
        for run_id, root in fold.finished.items():
            assert run_id not in fold.runs and (not root or fold.roots.owners[root] == run_id)
        for run_id, kept in fold.retired.items():  # reopenable: finished, recorded, no foreign ids
            state = json.loads(kept)
            assert run_id in fold.finished and state["finished"] is not None and not state["dedup"]["foreign"]
            assert not state["outstanding"]


# -- forgotten runs -------------------------------------------------------------------------


def test_forget_with_outstanding_deletions_is_refused_until_they_settle() -> None:
    fold = fold_of(*five(keep=2))
    owed = sorted((d.path, d.eviction) for d in fold.owed())
    before = state(fold)
    refused = fold.apply(f.event(f.forgotten("a"))).rejection
    assert refused is not None and refused.reason == Reason.DELETIONS_OWED and "3 deletion(s)" in refused.message
    assert state(fold) == before  # nothing changed: the deleter still finds what it owes
    back = restored(fold)
    assert sorted((d.path, d.eviction) for d in back.owed()) == owed
    fold_of(*(f.settled("a", deleted=[(p, e)]) for p, e in owed), fold=fold)
    assert fold.apply(f.event(f.forgotten("a"))).rejection is None
    assert "a" not in fold.runs and fold.finished == {"a": A}  # the root stays registered
    assert not fold.owed()  # the kept c3, c4 were never evicted: they stay in storage
    late = fold.apply(f.event(f.report("a", {}, f"{A}/c9"))).rejection
    assert late is not None and late.reason == Reason.RUN_FINISHED
    nested = fold.apply(f.event(f.started("b", f"{A}/b"))).rejection
    assert nested is not None and nested.reason == Reason.UNSAFE_STORAGE_ROOT
    assert fold.apply(f.event(f.forgotten("a"))).rejection is None  # again: nothing to do


def test_forget_of_a_finished_run_and_of_an_unknown_one_changes_no_kept_set() -> None:
    fold = fold_of(*five(keep=None), f.finished("a"), f.forgotten("a"), f.forgotten("ghost"))
    assert fold.finished == {"a": A} and not fold.runs
