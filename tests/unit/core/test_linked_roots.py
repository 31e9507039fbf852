"""The fold's half of contract §9 *Roots behind a symlink*: the processor's `root_refused` fact
refuses the run for good, and a replay rebuilds the same state from the log alone."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import event as note
from hypothesis import given
from hypothesis import strategies as st

from ckptlog.events.rejections import Reason
from ckptlog.processor.core import linked_roots
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.outputs import Effects
from ckptlog.processor.core.snapshot import canonical, decode, encode, of_fold
from ckptlog.processor.core.state import FoldSettings
from tests import factories as f
from tests.unit.core import published
from tests.unit.core.test_fold_properties import PROFILE, ROOT, SETTINGS, logs

ROOT_R = f"{ROOT}/l/r"
SEEN = f"{ROOT}/l is a symlink (to '/elsewhere')"


def fact(run: str = "r", root: str = ROOT_R, **kw: Any) -> bytes:
    return f.root_refused(run, root, SEEN, **kw)


def apply(fold: Fold, raw: bytes) -> Effects:
    effects = fold.apply(f.event(raw))
    published.check(effects.outputs)
    return effects


def whole(fold: Fold) -> bytes:
    """Every table of the fold, as a snapshot holds them."""
    return encode(of_fold(fold, "t", 0, 0))


def started_with_an_eviction(keep: int = 1) -> Fold:
    fold = Fold(SETTINGS)
    for raw in (
        f.started("r", ROOT_R, keep=keep),
        f.report("r", {}, f"{ROOT_R}/c1"),
        f.report("r", {}, f"{ROOT_R}/c2"),
    ):
        assert apply(fold, raw).rejection is None
    assert [e.path for e in fold.owed()] == [f"{ROOT_R}/c1"]
    return fold


def test_the_fact_refuses_the_run_for_good_and_settles_what_it_owes_as_refused() -> None:
    fold = started_with_an_eviction()
    effects = apply(fold, fact())
    assert effects.rejection is None and not effects.deletions
    codes = [(o.data["code"], o.data.get("checkpoint_path")) for o in effects.outputs]
    assert codes == [("deletion_refused", f"{ROOT_R}/c1"), ("root_behind_symlink", None)]
    assert SEEN in effects.outputs[-1].data["message"] and "1 kept and 1 evicted" in effects.outputs[-1].data["message"]
    assert "r" not in fold.runs and fold.symlinked == {"r": ROOT_R} and fold.owed() == []
    assert fold.roots.owners == {ROOT_R: "r"}
    assert fold.leaving["r"].run_id == "r"  # for the service: its VIEW is tombstoned
    for raw in (
        f.report("r", {}, f"{ROOT_R}/c3"),
        f.report("r", {"loss": 1}),
        f.result("r", f"{ROOT_R}/c2"),
        f.restart("r"),
        f.started("r", ROOT_R, keep=1),  # the same run_started again
        f.started("r", f"{ROOT}/fixed", keep=1),  # a corrected one: a new run needs a new id
        f.finished("r"),
    ):
        rejection = apply(fold, raw).rejection
        assert rejection is not None and rejection.reason == Reason.ROOT_BEHIND_SYMLINK
        assert ROOT_R in rejection.message and "new run id" in rejection.message
    for raw in (f.settled("r", deleted=[(f"{ROOT_R}/c1", 0)]), fact(), fact(event_id="again"), f.forgotten("r")):
        assert apply(fold, raw) == Effects()  # no-ops: a settlement, the fact again, a forget
    assert fold.symlinked == {"r": ROOT_R} and fold.roots.owners == {ROOT_R: "r"} and "r" not in fold.runs


@pytest.mark.parametrize(
    ("run_id", "root"),
    [("s", ROOT_R), ("s", f"{ROOT}/l"), ("s", f"{ROOT_R}/inside"), ("s", f"{ROOT}//l/r/")],
)
def test_its_root_stays_registered_so_no_other_run_nests_with_it(run_id: str, root: str) -> None:
    fold = started_with_an_eviction()
    apply(fold, fact())
    rejection = apply(fold, f.started(run_id, root)).rejection
    assert rejection is not None and rejection.reason == Reason.UNSAFE_STORAGE_ROOT and "'r'" in rejection.message
    snapshot = decode(whole(fold))
    restored = Fold(snapshot.settings, snapshot.runs, finished=snapshot.finished, symlinked=snapshot.symlinked)
    assert restored.roots.owners == {ROOT_R: "r"}
    again = apply(restored, f.started(run_id, root)).rejection
    assert again is not None and again.message == rejection.message  # the words of a clean replay (§9)


def test_an_implicit_runs_root_is_refused_alike() -> None:
    fold = Fold(SETTINGS)
    assert apply(fold, f.report("x", {}, f"{ROOT}/x/c1")).rejection is None  # root {--storage-root}/x
    apply(fold, fact("x", f"{ROOT}/x"))
    assert fold.symlinked == {"x": f"{ROOT}/x"}
    rejection = apply(fold, f.report("x", {}, f"{ROOT}/x/c2")).rejection  # never folded as a new implicit run
    assert rejection is not None and rejection.reason == Reason.ROOT_BEHIND_SYMLINK


@pytest.mark.parametrize("spelling", [f"{ROOT}//l/r/", "/data/l/r", "local:///data/l/./r"])
def test_the_fact_names_the_root_in_any_safe_spelling(spelling: str) -> None:
    fold = started_with_an_eviction()
    apply(fold, fact(root=spelling))
    assert fold.symlinked == {"r": ROOT_R}


def test_a_stale_or_foreign_fact_changes_nothing() -> None:
    fold = started_with_an_eviction()
    before = whole(fold)
    for raw in (fact(root=f"{ROOT}/l"), fact(root=f"{ROOT_R}/c1"), fact(root="s3://bucket/l/r"), fact(root="/a/../b")):
        effects = apply(fold, raw)
        assert effects.rejection is None and not effects.outputs and "r" in fold.runs
    assert fold.symlinked == {} and fold.roots.owners == {ROOT_R: "r"}
    assert whole(fold) != before  # only the dedup window remembered the facts' ids
    assert [e.path for e in fold.owed()] == [f"{ROOT_R}/c1"]
    for raw in (fact("unknown"), fact("refused", f"{ROOT}/other/../x")):
        assert apply(fold, raw) == Effects() and "unknown" not in fold.runs
    assert apply(fold, f.started("refused", "s3://bucket")).rejection is not None  # refused at its run_started
    assert "refused" in fold.refused
    assert apply(fold, fact("refused", "s3://bucket")) == Effects()  # not run_refused: our own fact, a no-op


def test_a_fact_for_a_finished_run_changes_nothing() -> None:
    fold = started_with_an_eviction()
    assert apply(fold, f.finished("r")).rejection is None  # finished, still owing c1: hot
    assert apply(fold, fact()) == Effects() and fold.runs["r"].finished == "kept" and fold.symlinked == {}
    apply(fold, f.settled("r", deleted=[(f"{ROOT_R}/c1", 0)]))  # retired now
    assert "r" in fold.finished
    assert apply(fold, fact()) == Effects()  # never a run_finished dead letter for the processor's own fact


@pytest.mark.from_source  # it replaces the fold's functions: against the sources (tests/compiled.py)
def test_a_fault_while_refusing_leaves_the_run_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    fold = started_with_an_eviction()
    before, owners = whole(fold), dict(fold.roots.owners)

    def broken(*args: Any) -> Any:
        raise RuntimeError("injected into warning")

    monkeypatch.setattr(linked_roots, "warning", broken)
    effects = apply(fold, fact())
    assert effects.rejection is not None and effects.rejection.reason == Reason.INTERNAL_ERROR
    assert whole(fold) == before and fold.roots.owners == owners and list(fold.runs) == ["r"]
    monkeypatch.undo()
    assert apply(fold, fact()).rejection is None and fold.symlinked == {"r": ROOT_R}


def test_a_schema_5_snapshot_has_no_symlinked_runs() -> None:
    """Written by a build that did not know the fact: it refused no run for a link."""
    fold = started_with_an_eviction()
    body = json.loads(whole(fold))["snapshot"]
    del body["symlinked"]
    for run in body["runs"].values():  # schema 7 replaced this list of ids (all foreign here)
        run["seen"] = run.pop("dedup")["foreign"]
    data = canonical(
        {"checksum": "sha256:" + hashlib.sha256(canonical(body)).hexdigest(), "format": "ckptlog.snapshot"}
    )
    data = data[:-1] + b',"schema_version":5,"snapshot":' + canonical(body) + b"}"
    snapshot = decode(data)
    assert snapshot.symlinked == {} and list(snapshot.runs) == ["r"]


# -- replays: the state is a function of the log --------------------------------------------------


@st.composite
def with_facts(draw: Any) -> list[bytes]:
    """A log of `logs()` with root facts spliced in: for a run's own root (of a started or an implicit
    run, or of no run yet), for another root, repeated."""
    lines: list[bytes] = draw(logs())
    for at in sorted(draw(st.lists(st.integers(0, len(lines)), max_size=3)), reverse=True):
        run = draw(st.sampled_from(["a", "b"]))
        root = draw(st.sampled_from([f"{ROOT}/{run}", f"{ROOT}/{run}/c1", f"{ROOT}//{run}/"]))
        lines.insert(at, fact(run, root, event_id=f"fact-{run}-{root}"))
    return lines


def trace_of(fold: Fold, lines: list[bytes]) -> list[Any]:
    trace = []
    for raw in lines:
        e = apply(fold, raw)
        trace.append(([(o.type, repr(o.data)) for o in e.outputs], [d.path for d in e.deletions], e.rejection))
    return trace


@PROFILE
@given(with_facts(), st.integers(0, 60))
def test_a_restore_at_any_offset_then_the_rest_equals_one_fold(lines: list[bytes], cut: int) -> None:
    cut = min(cut, len(lines))
    one = Fold(SETTINGS)
    full = trace_of(one, lines)
    first = Fold(SETTINGS)
    head = trace_of(first, lines[:cut])
    snap = decode(encode(of_fold(first, "t", 0, cut)))
    resumed = Fold(snap.settings, snap.runs, refused=snap.refused, finished=snap.finished, symlinked=snap.symlinked)
    assert head + trace_of(resumed, lines[cut:]) == full
    assert whole(resumed) == whole(one)
    quiet = Fold(SETTINGS, emit=False)
    trace_of(quiet, lines)
    assert whole(quiet) == whole(one)


@PROFILE
@given(with_facts())
def test_after_its_fact_a_run_deletes_nothing_and_takes_nothing(lines: list[bytes]) -> None:
    fold = Fold(SETTINGS)
    for raw in lines:
        event = f.event(raw)
        effects = apply(fold, raw)
        if event.subject in fold.symlinked and event.type != "ckptlog.root_refused.v1":
            assert not effects.deletions and not effects.outputs
            if effects.rejection is None:
                assert event.type.split(".")[1] in ("deletion_completed", "run_forgotten")
            else:
                assert effects.rejection.reason == Reason.ROOT_BEHIND_SYMLINK
        assert not {d.run_id for d in effects.deletions} & set(fold.symlinked)
    note(f"runs refused: {len(fold.symlinked)}")
    assert all(
        owner in fold.runs or owner in fold.symlinked or owner in fold.finished for owner in fold.roots.owners.values()
    )
    assert not {d.run_id for d in fold.owed()} & set(fold.symlinked)


def test_the_settings_of_a_fold_do_not_matter_to_the_fact() -> None:
    """Without --storage-root the processor writes no fact; a log that holds one (another processor's)
    is still folded the same."""
    fold = Fold(FoldSettings())
    apply(fold, f.started("r", ROOT_R))
    apply(fold, fact())
    assert fold.symlinked == {"r": ROOT_R}
