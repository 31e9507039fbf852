"""Reopened runs (contract §3 "Reopened runs", issue 38 item 6): a finished run goes on with its
state as it finished, while its finished record is kept; after the record expired, or for a run
with no state kept, a clear refusal."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptlog.client import ids
from ckptlog.events.rejections import Reason
from ckptlog.events.view import RunView
from ckptlog.processor.core import Fold, run_view
from ckptlog.processor.core.snapshot import SCHEMA_VERSION, canonical, decode, reopened_state, run_out
from tests import factories as f
from tests.unit.core.test_finished_runs import A, _reencode, _run, five, fold_of, restored, state
from tests.unit.core.test_fold_properties import PROFILE, ROOT, SETTINGS


def retired_five(keep: int | None = 2, how: str | None = None) -> Fold:
    """Run a with five checkpoints (keep 2: c0..c2 evicted, settled), finished and retired."""
    fold = fold_of(*five(keep=keep), f.finished("a", how, event_id=ids.finished_id("a")))
    owed = [(d.path, d.eviction) for d in fold.owed()]
    if owed:
        fold_of(f.settled("a", deleted=owed), fold=fold)
    assert "a" not in fold.runs and "a" in fold.retired
    return fold


def reopen(fold: Fold, run: str = "a", epoch: int = 1) -> Any:
    return fold.apply(f.event(f.reopened(run, event_id=ids.reopened_id(run, epoch))))


def test_a_reopen_after_the_finish_brings_back_exactly_what_the_run_kept() -> None:
    fold = fold_of(*five(keep=2))
    fold_of(f.settled("a", deleted=[(d.path, d.eviction) for d in fold.owed()]), fold=fold)
    before = run_view(fold.runs["a"])
    fold_of(f.finished("a"), fold=fold)
    effects = reopen(fold)
    assert effects.rejection is None and [o.type for o in effects.outputs] == ["watermark"]
    run = fold.runs["a"]
    assert "a" not in fold.finished and "a" not in fold.retired and fold.reopening == {"a": run}
    assert run_view(run) == {**before, "reopened": 1}  # the kept set, latest, best, watermarks, generation
    assert [c.path for c in run.checkpoints] == [f"{A}/c3", f"{A}/c4"] and run.latest is not None
    assert (run.report_count, run.evictions, run.finished, run.reopened) == (5, 3, None, 1)
    assert fold.roots.owners[A] == "a"  # its root never left it
    assert RunView.model_validate(run_view(run)).reopened == 1


def test_a_reopened_runs_later_evictions_are_deleted_and_settled_as_ever() -> None:
    fold = retired_five()
    reopen(fold)
    effects = fold.apply(f.event(f.report("a", {"acc": 9}, f"{A}/c5", event_id="r5")))
    assert [(d.path, d.eviction) for d in effects.deletions] == [(f"{A}/c3", 3)]  # rank 3 of 3, keep 2
    assert [c.path for c in fold.runs["a"].checkpoints] == [f"{A}/c4", f"{A}/c5"]
    fold_of(f.settled("a", deleted=[(f"{A}/c3", 3)]), fold=fold)
    assert not fold.owed() and "a" in fold.runs  # not finished: it stays when settled
    again = fold.apply(f.event(f.report("a", {"acc": 0}, f"{A}/c3", event_id="r3-again")))
    assert again.rejection is None  # the settled path is free again


def test_a_hot_finished_run_reopens_and_still_owes_its_deletions() -> None:
    fold = fold_of(*five(keep=2), f.finished("a", "best"))
    owed = sorted((d.path, d.eviction) for d in fold.owed())
    assert owed and fold.runs["a"].finished == "best"
    assert reopen(fold).rejection is None
    run = fold.runs["a"]
    assert run.finished is None and run.reopened == 1 and not fold.reopening  # it never left: no retired claim
    assert sorted((d.path, d.eviction) for d in fold.owed()) == owed
    fold_of(f.settled("a", deleted=owed), fold=fold)
    assert "a" in fold.runs and "a" not in fold.finished  # settled, but no longer finished: stays


def test_a_reopen_of_a_run_that_has_not_finished_is_refused() -> None:
    fold = fold_of(*five())
    before = state(fold)
    effects = reopen(fold)
    assert effects.rejection is not None and effects.rejection.reason == Reason.RUN_NOT_FINISHED
    assert "'a' has not finished" in effects.rejection.message and state(fold) == before


def test_a_reopen_of_an_unknown_or_expired_run_is_refused_naming_it() -> None:
    fold = Fold(dataclasses.replace(SETTINGS, finished_runs_kept=1))
    nobody = reopen(fold, "nobody")
    assert nobody.rejection is not None and nobody.rejection.reason == Reason.UNKNOWN_RUN
    fold_of(*five(keep=None), f.finished("a"), fold=fold)
    fold_of(f.started("b", f"{ROOT}/b"), f.finished("b"), fold=fold)  # the bound is 1: a's record expires
    assert "a" not in fold.finished and "a" not in fold.retired
    before = state(fold)
    effects = reopen(fold)
    assert effects.rejection is not None and effects.rejection.reason == Reason.UNKNOWN_RUN
    assert "'a'" in effects.rejection.message and "--finished-runs-kept" in effects.rejection.message
    assert "new run id" in effects.rejection.message and state(fold) == before
    # and today's rule for the id stays: a run_started reusing it is a new run
    assert fold.apply(f.event(f.started("a", A, event_id="again"))).rejection is None
    assert fold.runs["a"].report_count == 0


def test_a_forgotten_run_is_not_reopenable_and_forgetting_a_retired_run_drops_its_state() -> None:
    fold = fold_of(f.started("m", f"{ROOT}/m"), f.report("m", {}, f"{ROOT}/m/c0"), f.forgotten("m"))
    assert "m" in fold.finished and "m" not in fold.retired
    effects = reopen(fold, "m")
    assert effects.rejection is not None and effects.rejection.reason == Reason.NOT_REOPENABLE
    assert "forgotten" in effects.rejection.message
    fold = retired_five()
    assert fold.apply(f.event(f.forgotten("a"))).rejection is None
    assert "a" in fold.finished and "a" not in fold.retired  # its record stays, its state goes
    effects = reopen(fold)
    assert effects.rejection is not None and effects.rejection.reason == Reason.NOT_REOPENABLE


def test_a_refused_run_is_answered_as_ever() -> None:
    fold = fold_of(f.started("x", "/"))
    effects = reopen(fold, "x")
    assert effects.rejection is not None and effects.rejection.reason == Reason.RUN_REFUSED


def test_finish_and_reopen_cycles_are_told_apart_by_their_epoch_ids() -> None:
    """The clients name a finish and a reopen by the run's epoch (ckptlog.client.ids): a second
    finish with the first one's id is a duplicate while the run is hot (its window remembers it),
    so a finish after a reopen needs the id of its own epoch."""
    fold = fold_of(*five(keep=2), f.finished("a", event_id=ids.finished_id("a")))  # owes c0..c2: hot
    assert reopen(fold, epoch=1).rejection is None
    repeat = fold.apply(f.event(f.finished("a", event_id=ids.finished_id("a"))))
    assert repeat.duplicate and fold.runs["a"].finished is None  # the epoch-0 id: no finish of epoch 1
    assert reopen(fold, epoch=1).duplicate  # a retried reopen
    assert fold.apply(f.event(f.finished("a", event_id=ids.finished_id("a", 1)))).rejection is None
    assert fold.runs["a"].finished == "kept"
    fold_of(f.settled("a", deleted=[(d.path, d.eviction) for d in fold.owed()]), fold=fold)
    assert "a" in fold.retired and json.loads(fold.retired["a"])["reopened"] == 1  # retired again, its epoch kept
    assert reopen(fold, epoch=2).rejection is None and fold.runs["a"].reopened == 2
    assert run_view(fold.runs["a"])["reopened"] == 2
    assert fold.apply(f.event(f.finished("a", event_id=ids.finished_id("a", 2)))).rejection is None
    assert "a" in fold.retired  # it owed nothing: retired at once
    ids_of = {ids.finished_id("a", e) for e in range(3)} | {ids.reopened_id("a", e) for e in (1, 2)}
    assert len(ids_of) == 5 and ids.finished_id("a", 0) == ids.finished_id("a")  # epoch 0: the id as before


def test_a_reopen_is_all_or_nothing() -> None:
    for fold in (retired_five(), fold_of(*five(keep=2), f.finished("a"))):
        before, finished, retired = state(fold), list(fold.finished), list(fold.retired)
        assert reopen(fold).rejection is None
        fold.rollback_last()
        assert state(fold) == before and list(fold.finished) == finished and list(fold.retired) == retired


def test_a_retired_run_keeps_its_state_encoded_without_its_foreign_ids() -> None:
    fold = retired_five()
    kept, run = fold.retired["a"], fold.leaving["a"]
    assert isinstance(kept, bytes) and json.loads(kept)["finished"] == "kept"
    assert json.loads(kept)["dedup"] == {"applied": run.seen.applied, "marks": [], "foreign": []}
    assert kept == canonical({**run_out(run), "dedup": {**run.seen.data(), "foreign": []}})
    reopen(fold)
    assert fold.runs["a"].seen.foreign_ids() == [ids.reopened_id("a", 1)]


def test_a_reopened_run_still_knows_its_structured_ids_and_forgot_its_foreign_ones() -> None:
    """contract §3 "Reopened runs": a retired run keeps its producers' ranges and out-of-order
    numbers, through a snapshot too; a retry of a report its Reporter numbered is a duplicate
    after the reopen, one of an event with a foreign id is applied again."""
    reports = [f.report("a", {"acc": i}, f"{A}/c{i}", event_id=ids.report_id("a", None, i)) for i in range(5)]
    late = f.report("a", {"acc": 9}, f"{A}/c9", event_id=ids.report_id("a", None, 9))  # out of order
    metrics = f.report("a", {"loss": 1}, event_id="foreign-1")
    fold = fold_of(f.started("a", A, keep=2, attr="acc", event_id="start"), *reports, late, metrics)
    fold_of(f.settled("a", deleted=[(d.path, d.eviction) for d in fold.owed()]), f.finished("a"), fold=fold)
    assert "a" in fold.retired
    marks = json.loads(fold.retired["a"])["dedup"]["marks"]
    assert [m[:3] for m in marks] == [["r:0", 0, 4]] and [n for _, ns in marks[0][4] for n in ns] == [9]
    for back in (fold, restored(fold)):
        assert reopen(back).rejection is None
        assert all(back.apply(f.event(raw)).duplicate for raw in (*reports, late))
        count = back.runs["a"].report_count
        assert not back.apply(f.event(metrics)).duplicate and back.runs["a"].report_count == count + 1
        fifth = f.report("a", {"acc": 1}, f"{A}/c5", event_id=ids.report_id("a", None, 5))
        assert not back.apply(f.event(fifth)).duplicate  # the next number: new


def test_a_schema_6_snapshot_restores_its_retired_states_with_nothing_remembered() -> None:
    """Schema 6 wrote a retired state with `"seen": []` and each hot run's last ids in `seen`: read
    as the state schema 7 writes (`dedup` in the place of `seen`), the run reopens and recognises
    none of its earlier events, as under the build that retired it; a hot run's ids stay known."""
    fold = retired_five()
    fold_of(f.started("b", f"{ROOT}/b", event_id="sb"), f.report("b", {"loss": 1}, event_id="rb"), fold=fold)
    body = json.loads(state(fold))["snapshot"]
    body["runs"]["b"]["seen"] = body["runs"]["b"].pop("dedup")["foreign"]  # the list's place: at the end
    retired = json.loads(fold.retired["a"])
    old = {key: [] if key == "dedup" else value for key, value in retired.items()}
    body["retired"]["a"] = {("seen" if key == "dedup" else key): value for key, value in old.items()}
    snap = decode(_reencode(body, 6))
    nothing = {"applied": 0, "marks": [], "foreign": []}
    assert snap.retired["a"] == canonical({**retired, "dedup": nothing})  # dedup where seen was
    back = Fold(snap.settings, snap.runs, refused=snap.refused, finished=snap.finished, retired=snap.retired)
    assert back.apply(f.event(f.report("b", {"loss": 1}, event_id="rb"))).duplicate
    assert reopen(back).rejection is None and back.runs["a"].seen.foreign_ids() == [ids.reopened_id("a", 1)]
    assert not back.apply(f.event(f.report("a", {"loss": 1}, event_id="r0"))).duplicate
    assert json.loads(state(back))["schema_version"] == 7


def test_a_snapshot_of_a_finished_and_kept_run_round_trips_and_reopens_alike() -> None:
    fold = retired_five(how="best")
    data = state(fold)
    back = restored(fold)
    assert state(back) == data and list(back.retired) == ["a"]
    assert json.loads(data)["snapshot"]["retired"]["a"]["dedup"]["foreign"] == []
    lines = [f.reopened("a", event_id="ro"), f.report("a", {"acc": 7}, f"{A}/c9", event_id="r9")]
    assert _run(lines, back) == _run(lines, fold)
    assert state(back) == state(fold) and back.runs["a"].reopened == 1


def test_a_run_retired_under_schema_5_is_refused_a_reopen_with_what_to_do() -> None:
    """A schema 5 snapshot holds finished records without state: such a run's reopen is refused
    (`not_reopenable`), naming the run and what to do; everything else restores as before."""
    body = json.loads(state(retired_five()))["snapshot"]
    del body["retired"]
    for run in body["runs"].values():
        del run["reopened"]
    snap = decode(_reencode(body, 5))
    assert snap.finished == {"a": A} and snap.retired == {}
    back = Fold(snap.settings, snap.runs, refused=snap.refused, finished=snap.finished, retired=snap.retired)
    effects = reopen(back)
    assert effects.rejection is not None and effects.rejection.reason == Reason.NOT_REOPENABLE
    message = effects.rejection.message
    assert "'a'" in message and "schema 5 or older" in message and "new run id" in message
    assert back.roots.owners[A] == "a"  # its root stays registered as ever


@pytest.mark.parametrize("field", ["reopened"])
def test_a_snapshot_with_a_bad_reopen_count_is_corrupt(field: str) -> None:
    from ckptlog.errors import SnapshotCorrupt

    fold = retired_five()
    reopen(fold)
    body = json.loads(state(fold))["snapshot"]
    body["runs"]["a"][field] = -1
    with pytest.raises(SnapshotCorrupt, match="reopened"):
        decode(_reencode(body, SCHEMA_VERSION))
    body["runs"]["a"][field] = 1
    body["retired"] = {"ghost": body["runs"]["a"]}  # a state with no finished record
    with pytest.raises(SnapshotCorrupt, match="retired"):
        decode(_reencode(body, SCHEMA_VERSION))


@pytest.mark.from_source  # it replaces the fold's functions: against the sources (tests/compiled.py)
@pytest.mark.parametrize("site", ["watermark", "reopened_state"])
def test_a_fault_while_reopening_leaves_the_fold_as_it_was(site: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """contract §7: a fault part-way through a reopen (after its tables changed, or before) is
    rolled back and the event rejected as `internal_error`; a clean reopen follows."""
    from ckptlog.processor.core import reopening

    fold = retired_five()
    fold_of(f.started("b", f"{ROOT}/b"), f.finished("b"), fold=fold)  # a's record is not the last one
    before, finished, retired = state(fold), list(fold.finished), list(fold.retired)
    real = getattr(reopening, site)

    def faulty(*args: Any) -> Any:
        raise RuntimeError(f"injected into {site}")

    monkeypatch.setattr(reopening, site, faulty)
    effects = reopen(fold)
    assert effects.rejection is not None and effects.rejection.reason == Reason.INTERNAL_ERROR
    assert state(fold) == before and list(fold.finished) == finished and list(fold.retired) == retired
    assert "a" not in fold.runs
    monkeypatch.setattr(reopening, site, real)
    assert reopen(fold).rejection is None and fold.runs["a"].reopened == 1


# -- properties -----------------------------------------------------------------------------


@st.composite
def cycles(draw: Any) -> list[bytes]:
    """Two runs reporting, finishing (either keep), settling, reopening and finishing again, the
    finish and reopen ids named by epoch as the clients name them; settlements made concrete by a
    scratch fold (they name the evictions it owes)."""
    scratch, lines = Fold(SETTINGS), []
    for run in ("a", "b"):
        lines.append(f.started(run, f"{ROOT}/{run}", keep=2, attr="acc", event_id=f"s-{run}"))
        scratch.apply(f.event(lines[-1]))
    for step in range(draw(st.integers(1, 30))):
        run = draw(st.sampled_from(["a", "b"]))
        kind = draw(st.sampled_from(["report", "report", "finish", "settle", "reopen"]))
        held = scratch.runs.get(run)
        epoch = (
            held.reopened if held is not None else json.loads(scratch.retired.get(run, b'{"reopened":0}'))["reopened"]
        )
        if kind == "report":
            raw = f.report(run, {"acc": draw(st.integers(0, 9))}, f"{ROOT}/{run}/c{step}", event_id=f"r-{step}")
        elif kind == "finish":
            raw = f.finished(run, draw(st.sampled_from([None, "best"])), event_id=ids.finished_id(run, epoch))
        elif kind == "reopen":
            raw = f.reopened(run, event_id=ids.reopened_id(run, epoch + 1))
        else:
            owed = [(d.path, d.eviction) for d in scratch.owed() if d.run_id == run]
            if not owed:
                continue
            raw = f.settled(run, deleted=owed, event_id=f"d-{step}")
        scratch.apply(f.event(raw))
        lines.append(raw)
    return lines


@PROFILE
@given(cycles(), st.integers(0, 40))
def test_finish_and_reopen_cut_anywhere_restore_and_replay_equal_one_straight_fold(
    lines: list[bytes], cut: int
) -> None:
    cut = min(cut, len(lines))
    whole = Fold(SETTINGS)
    whole_trace = _run(lines, whole)
    first = Fold(SETTINGS)
    first_trace = _run(lines[:cut], first)
    resumed = restored(first)
    assert first_trace + _run(lines[cut:], resumed) == whole_trace
    assert state(resumed) == state(whole) and list(resumed.retired) == list(whole.retired)


@PROFILE
@given(cycles())
def test_a_reopen_brings_back_exactly_the_state_the_run_finished_with(lines: list[bytes]) -> None:
    fold = Fold(SETTINGS)
    for raw in lines:
        event = f.event(raw)
        run_id, hot = event.subject, fold.runs.get(event.subject)
        kept = fold.retired.get(run_id)
        before = run_view(hot) if hot is not None else run_view(reopened_state(run_id, kept)) if kept else None
        effects = fold.apply(event)
        if event.type != "ckptlog.run_reopened.v1" or effects.rejection is not None or effects.duplicate:
            continue
        assert before is not None and before.pop("finished") is True
        assert run_view(fold.runs[run_id]) == {**before, "reopened": before.get("reopened", 0) + 1}
        assert not effects.deletions and run_id not in fold.finished and run_id not in fold.retired
