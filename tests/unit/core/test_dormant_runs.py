"""Restored runs built on first use (contract §6 *Dormant runs*, core/run_codec.py `DormantRun`): a run
of a schema 7 snapshot whose entry is in the written form stays unbuilt until something reads it; the
state, outputs and snapshot bytes are the same whether or not a run was touched, for bases and chains,
and an entry that is not a run's still makes the snapshot corrupt at restore."""

from __future__ import annotations

import json
import pickle
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlog.errors import SnapshotCorrupt
from ckptlog.processor.core import Fold
from ckptlog.processor.core.delta import Capture, decode_chain
from ckptlog.processor.core.run_codec import DormantRun, run_out
from ckptlog.processor.core.snapshot import Snapshot, decode, encode, of_fold
from ckptlog.processor.core.state import RunState
from ckptlog.processor.service.restore import restored_fold
from tests import factories as f
from tests.unit.core.test_delta import lives
from tests.unit.core.test_fold_properties import SETTINGS
from tests.unit.core.test_restore_paths import _sealed, _state, busy_fold
from tests.unit.core.test_schema6_chain import BASE, DELTA


def fold_of(snap: Snapshot) -> Fold:
    return restored_fold(snap, snap.settings, track=True)  # as a restore builds it


def dormant(snap: Snapshot) -> set[str]:
    return {run_id for run_id, run in snap.runs.items() if type(run) is DormantRun}


def woken(snap: Snapshot) -> Snapshot:
    """Every run touched (a field read): built."""
    for run in snap.runs.values():
        assert run.report_count >= 0
        assert type(run) is RunState
    return snap


def taken(capture: Capture) -> bytes:
    while capture.step():
        pass
    return capture.encoded()


def test_a_restored_run_is_dormant_and_writes_the_bytes_it_was_read_from_touched_or_not() -> None:
    data = encode(of_fold(busy_fold(), "t", 0, 9))
    snap = decode(data)
    assert dormant(snap) == set(snap.runs), "every entry as written restores dormant"
    assert encode(snap) == data, "untouched: encoded from the entries"
    assert dormant(snap) == set(snap.runs), "encoding builds none"
    assert encode(woken(decode(data))) == data
    half = decode(data)
    assert half.runs["r"].generation >= 0  # one touched, the others not
    assert dormant(half) == set(half.runs) - {"r"} and encode(half) == data


def test_a_dormant_run_builds_the_state_a_plain_restore_builds() -> None:
    fold = busy_fold()
    back = decode(encode(of_fold(fold, "t", 0, 9)))
    for run_id, run in back.runs.items():
        assert _state(run) == _state(fold.runs[run_id]), run_id
        assert type(run) is RunState and not hasattr(run, "entry"), "built: plain, its entry let go"


def test_the_paths_after_a_restore_read_every_run_without_building_it() -> None:
    fold = busy_fold()
    expected = {
        run_id: (run.kept_paths(), list(run.owed_evictions()), run.live_counts(), run.root, run.reopened)
        for run_id, run in fold.runs.items()
    }
    assert any(evictions for _, evictions, _, _, _ in expected.values()), "some evictions are owed"
    snap = decode(encode(of_fold(fold, "t", 0, 9)))
    restored = fold_of(snap)  # every root registered
    owed = restored.owed()
    got = {
        run_id: (run.kept_paths(), list(run.owed_evictions()), run.live_counts(), run.root, run.reopened)
        for run_id, run in restored.runs.items()
    }
    assert dormant(snap) == set(snap.runs), "none built"
    assert got == expected and owed == fold.owed()
    assert restored.roots.owners == fold.roots.owners


def test_a_write_to_a_dormant_run_builds_it_first() -> None:
    snap = decode(encode(of_fold(busy_fold(), "t", 0, 9)))
    run = snap.runs["r"]
    run.report_count += 5
    assert type(run) is RunState and run.report_count == busy_fold().runs["r"].report_count + 5
    assert len(run.by_key) == busy_fold().runs["r"].live_counts()[0]


def test_a_pickled_dormant_run_is_its_built_state() -> None:
    data = encode(of_fold(busy_fold(), "t", 0, 9))
    run = decode(data).runs["r"]
    copy = pickle.loads(pickle.dumps(run))
    assert type(copy) is RunState and run_out(copy) == run_out(decode(data).runs["r"])


def test_a_chain_restores_dormant_and_its_next_base_and_delta_are_those_of_the_fold() -> None:
    fold = busy_fold()
    base = taken(Capture(fold, "t", 0, 5, None))
    for line in (f.report("r", {"acc": 0.95}, "file:///d/r/f"), f.report("new", {"acc": 1}, "file:///d/new/a")):
        assert fold.apply(f.event(line)).rejection is None
    delta = taken(Capture(fold, "t", 0, 9, decode_chain([base]).chain))
    snap = decode_chain([base, delta])
    assert dormant(snap) == set(snap.runs)
    restored = fold_of(snap)
    assert taken(Capture(restored, "t", 0, 9, None)) == encode(of_fold(fold, "t", 0, 9)), "a base of untouched runs"
    assert dormant(snap) == set(snap.runs)
    line = f.report("implicit", {"acc": 3}, "file:///d/implicit/y")
    for each in (fold, restored):
        assert each.apply(f.event(line)).rejection is None
    assert type(restored.runs["implicit"]) is RunState and dormant(snap) == set(snap.runs) - {"implicit"}
    chain = decode_chain([base, delta]).chain
    assert taken(Capture(restored, "t", 0, 10, chain)) == taken(Capture(fold, "t", 0, 10, chain))


def test_an_older_schema_is_built_at_once() -> None:
    snap = decode_chain([BASE, DELTA])
    assert snap.runs and not dormant(snap)


@pytest.mark.parametrize(
    "change",
    [
        lambda entry: entry["checkpoints"].reverse(),
        lambda entry: entry.update(pending=[*entry["pending"], *entry["pending"]]),
        lambda entry: entry.update(outstanding=[*entry["outstanding"], *entry["outstanding"]]),
        lambda entry: entry.update(checkpoints=[*entry["checkpoints"], entry["checkpoints"][-1]]),
    ],
)
def test_an_entry_not_in_the_written_form_is_built_at_once(change: Any) -> None:
    """Valid, but its state writes it otherwise (sorted, each key once): built, so that the bytes a
    snapshot writes never depend on whether the run was touched."""
    body = json.loads(encode(of_fold(busy_fold(), "t", 0, 9)))["snapshot"]
    assert body["runs"]["r"]["pending"] and body["runs"]["r"]["outstanding"], "the run the changes need"
    change(body["runs"]["r"])
    snap = decode(_sealed(body))
    assert dormant(snap) == set(snap.runs) - {"r"}
    assert encode(snap) == encode(woken(decode(_sealed(body))))


@pytest.mark.parametrize(
    "change",
    [
        lambda entry: entry.update(dedup={**entry["dedup"], "applied": -1}),
        lambda entry: entry.update(dedup={**entry["dedup"], "foreign": ["x", "x"]}),
        lambda entry: entry.update(storage_root="file:///d/../etc"),
        lambda entry: entry["checkpoints"][0].update(key=7),
        lambda entry: entry["checkpoints"][0].update(metrics=[1]),
        lambda entry: entry["checkpoints"][0].update(report_index="0"),
        lambda entry: entry.update(outstanding=[["k", "p"]]),
        lambda entry: entry.update(evictions=1.5),
        lambda entry: entry.update(pending=["file:///d/r/none"]),
        lambda entry: entry.update(report_count="3"),
        lambda entry: entry.update(report_count=2**62 + 1),
        lambda entry: entry.update(generation=-1),
        lambda entry: entry.update(index_in_generation=1.0),
        lambda entry: entry.update(index_in_generation=True),
    ],
)
def test_an_entry_that_is_not_a_run_is_still_refused_at_restore(change: Any) -> None:
    body = json.loads(encode(of_fold(busy_fold(), "t", 0, 9)))["snapshot"]
    change(body["runs"]["r"])
    with pytest.raises(SnapshotCorrupt, match="content invalid"):
        decode(_sealed(body))


def test_a_build_that_fails_anyway_names_the_run_and_leaves_it_dormant() -> None:
    snap = decode(encode(of_fold(busy_fold(), "t", 0, 9)))
    run = snap.runs["r"]
    entry = run.entry
    object.__setattr__(run, "entry", msgspec.structs.replace(entry, latest="file:///d/r/gone"))  # past the checks
    with pytest.raises(SnapshotCorrupt, match="run 'r'.*cannot be built"):
        _ = run.by_key
    assert type(run) is DormantRun
    object.__setattr__(run, "entry", entry)
    assert len(run.by_key) == run.live_counts()[0] and type(run) is RunState


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lives(), st.integers(0, 60), st.booleans())
def test_a_fold_restored_dormant_goes_on_as_the_built_one_and_the_original(
    lines: list[bytes], cut: int, chained: bool
) -> None:
    """Snapshot after `cut` events (a base, or a base and a delta), restored twice: dormant, and every
    run touched at once; the rest of the log folded by both and by the fold never restored gives the
    same effects and the same snapshot bytes."""
    cut = min(cut, len(lines))
    fold = Fold(SETTINGS, track_changes=True)
    for raw in lines[: cut // 2]:
        fold.apply(f.event(raw))
    objects = [taken(Capture(fold, "t", 0, cut // 2, None))]
    for raw in lines[cut // 2 : cut]:
        fold.apply(f.event(raw))
    if chained and cut > cut // 2:  # a delta must be past its base's offset
        objects.append(taken(Capture(fold, "t", 0, cut, decode_chain(objects).chain)))
    elif not chained:
        objects = [encode(of_fold(fold, "t", 0, cut))]
    lazy, built = fold_of(decode_chain(objects)), fold_of(woken(decode_chain(objects)))
    assert (
        encode(of_fold(lazy, "t", 0, cut)) == encode(of_fold(built, "t", 0, cut)) == encode(of_fold(fold, "t", 0, cut))
    )
    for raw in lines[cut:]:
        event = f.event(raw)
        effects = [each.apply(event) for each in (fold, lazy, built)]
        assert effects[0] == effects[1] == effects[2], raw
    final = [encode(of_fold(each, "t", 0, len(lines))) for each in (fold, lazy, built)]
    assert final[0] == final[1] == final[2]
