"""A replay of a few runs (ckptlog/processor/explain/run_replay.py) equals a fold of the whole partition,
for those runs: every step's effects and the state after it; and `explain` agrees with the fold."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlog.events.codec import decode_event
from ckptlog.events.outputs import CHECKPOINTS_MISSING, OUTPUTS
from ckptlog.events.rejections import Rejection
from ckptlog.processor.core import Fold, run_view
from ckptlog.processor.core.snapshot import canonical, decode, encode, of_fold
from ckptlog.processor.explain.checkpoint import explain, path_key
from ckptlog.processor.explain.run_replay import RunReplay
from ckptlog.processor.explain.story import _OF_OUTPUT, EFFECT_KINDS, effects_of
from tests import factories as f
from tests.unit.core.test_fold_properties import ROOT, SETTINGS, logs

RUNS = ("a", "b", "c")
PROFILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    offset: int
    timestamp: int | None = 1_700_000_000_000


@st.composite
def partitions(draw: st.DrawFn) -> list[Rec]:
    """Several runs' events with what couples runs: roots that nest or collide, a run_started after
    reports, finishes, forgets, reopens, undecodable and keyless records."""
    lines = draw(logs(runs=RUNS))
    hostile = [
        f.started("b", f"{ROOT}/a"),  # b takes a's implicit root
        f.started("c", ROOT),  # above every implicit root
        f.started("a", f"{ROOT}/a/inner"),  # inside its own implicit root
        f.started("c", f"{ROOT}/c2"),  # a fresh root, after c may have reported
        f.finished("a", keep=draw(st.sampled_from([None, "best", "kept"]))),
        f.forgotten("b"),
        f.reopened("a"),  # contract §3 "Reopened runs": its state back, or refused
        f.reopened("b"),
        f.report("a", {"acc": 1}, f"{ROOT}/b/x1"),  # into another run's root
        b"garbage",
    ]
    for extra in draw(st.lists(st.sampled_from(hostile), max_size=5)):
        lines.insert(draw(st.integers(0, len(lines))), extra)
    records = []
    for offset, raw in enumerate(lines):
        event = decode_event(raw)
        key = None if isinstance(event, Rejection) else event.subject.encode()
        if key is not None and draw(st.integers(0, 15)) == 0:
            key = None  # a keyless record: the fold reads its subject
        records.append(Rec(key if raw != b"garbage" else b"a", raw, offset))
    return records


def full_fold(records: list[Rec], run_id: str) -> tuple[Fold, list[tuple[int, list[dict[str, Any]]]]]:
    """The reference: one fold of every record; the target run's steps (offset, effects)."""
    fold = Fold(SETTINGS)
    steps = []
    for rec in records:
        event = decode_event(rec.value or b"", rec.key)
        if isinstance(event, Rejection):
            if rec.key == run_id.encode():
                steps.append((rec.offset, [{"kind": "rejected", "reason": str(event.reason)}]))
            continue
        effects = fold.apply(event)
        if event.subject == run_id:
            steps.append((rec.offset, effects_of(event, effects)))
    return fold, steps


def replayed(records: list[Rec], run_id: str, snapshot_at: int | None = None) -> RunReplay:
    snapshot = None
    if snapshot_at is not None:  # a snapshot of the whole fold at `snapshot_at`, as the processor writes
        fold = Fold(SETTINGS)
        for rec in records[:snapshot_at]:
            event = decode_event(rec.value or b"", rec.key)
            if not isinstance(event, Rejection):
                fold.apply(event)
        written = encode(of_fold(fold, "in", 0, snapshot_at))
        snapshot = decode(written)
        records = records[snapshot_at:]
    replay = RunReplay(SETTINGS, [run_id], snapshot)
    replay.feed(records)
    if not replay.exact():  # a snapshot of its own: the first replay folded into the states of this one
        replay = RunReplay(SETTINGS, [run_id], None if snapshot is None else decode(written), whole=True)
        replay.feed(records)
    return replay


def _comparable(effects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"kind": e["kind"], "reason": e["reason"]} if e["kind"] == "rejected" else e for e in effects]


@PROFILE
@given(partitions(), st.sampled_from(RUNS))
def test_a_replay_of_one_run_equals_the_fold_of_every_run(records: list[Rec], run_id: str) -> None:
    fold, expected = full_fold(records, run_id)
    replay = replayed(records, run_id)
    got = [(s.offset, _comparable(s.effects)) for s in replay.steps[run_id]]
    assert {e["kind"] for s in replay.steps[run_id] for e in s.effects} <= set(EFFECT_KINDS)
    assert got == [(o, _comparable(e)) for o, e in expected]
    mine, theirs = replay.fold.runs.get(run_id), fold.runs.get(run_id)
    assert (mine is None) == (theirs is None)
    if mine is not None and theirs is not None:
        assert canonical(run_view(mine)) == canonical(run_view(theirs))
    assert (run_id in replay.fold.refused) == (run_id in fold.refused)


@PROFILE
@given(partitions(), st.sampled_from(RUNS), st.data())
def test_a_replay_from_a_snapshot_equals_the_fold_of_every_run(records: list[Rec], run_id: str, data: Any) -> None:
    cut = data.draw(st.integers(0, len(records)))
    fold, _ = full_fold(records, run_id)
    replay = replayed(records, run_id, snapshot_at=cut)
    mine, theirs = replay.fold.runs.get(run_id), fold.runs.get(run_id)
    assert (mine is None) == (theirs is None)
    if mine is not None and theirs is not None:
        assert canonical(run_view(mine)) == canonical(run_view(theirs))


@PROFILE
@given(partitions(), st.sampled_from(RUNS))
def test_explain_agrees_with_the_fold(records: list[Rec], run_id: str) -> None:
    """Every kept path is explained as kept (or latest, pending, preserved); every path evicted since
    its last report names the input event whose folding first stopped keeping it."""
    fold, expected = full_fold(records, run_id)
    replay = replayed(records, run_id)
    run = replay.state(run_id)
    paths = {e["path"] for _, effects in expected for e in effects if e["kind"] == "registered"}
    ids = {rec.offset: decode_event(rec.value or b"") for rec in records}
    for path in paths:
        doc = explain(run_id, path, replay.steps[run_id], run)
        key = path_key(path)
        last_report = max(
            o for o, effects in expected for e in effects if e["kind"] == "registered" and path_key(e["path"]) == key
        )
        evictions = [
            (o, e)
            for o, effects in expected
            for e in effects
            if e["kind"] == "evicted" and path_key(e["path"]) == key and o >= last_report
        ]
        theirs = fold.runs.get(run_id)
        if theirs is not None and key in theirs.by_key:
            assert doc["state"] in ("kept", "latest", "pending", "preserved"), doc
            assert doc["evicted"] is None and doc["kept_because"] is not None
            if doc["kept_because"]["within_num_to_keep"] and theirs.keep is not None:
                assert doc["kept_because"]["rank"] <= theirs.keep
        elif evictions:
            offset, effect = evictions[0]
            assert doc["state"] in ("evicted", "deleted", "deletion_refused"), doc
            event = ids[offset]
            assert not isinstance(event, Rejection)
            assert doc["evicted"]["offset"] == offset and doc["evicted"]["id"] == event.id
            assert doc["evicted"]["reason"] == effect["reason"]
            owed = theirs is not None and key in theirs.outstanding
            assert (doc["state"] == "evicted") == owed, doc
        assert doc["reported"]["offset"] == last_report


def test_an_unknown_path_is_unknown() -> None:
    records = [Rec(b"a", f.report("a", {"acc": 1}, f"{ROOT}/a/c1"), 0)]
    replay = replayed(records, "a")
    doc = explain("a", f"{ROOT}/a/nope", replay.steps["a"], replay.state("a"))
    assert doc["state"] == "unknown" and doc["reported"] is None
    doc = explain("a", f"{ROOT}/a//c1", replay.steps["a"], replay.state("a"))  # another spelling of the path
    assert doc["state"] == "kept" and doc["kept_because"]["latest"] and doc["reported"]["offset"] == 0


def test_a_root_another_run_holds_makes_the_replay_fold_every_run() -> None:
    """b's run_started names a's root: only a fold that sees a refuses it. The split replay says it
    was not exact, and the whole replay refuses b as the processor did."""
    lines = [f.report("a", {"acc": 1}, f"{ROOT}/a/c1"), f.started("b", f"{ROOT}/a"), f.report("b", {}, f"{ROOT}/a/c2")]
    records = [Rec(b"a" if i == 0 else b"b", raw, i) for i, raw in enumerate(lines)]
    split = RunReplay(SETTINGS, ["b"])
    split.feed(records)
    assert not split.exact()
    whole = replayed(records, "b")
    assert "b" in whole.fold.refused
    assert [e["kind"] for s in whole.steps["b"] for e in s.effects] == ["rejected", "rejected"]


def test_a_record_with_a_backslash_reaches_the_context_fold() -> None:
    """A byte search for the type misses `ckptlog\\u002erun_started`: a record of another run with a
    backslash is decoded and folded like a run_started, whatever its type turns out to be."""
    escaped = f.started("c", f"{ROOT}/a").replace(b"ckptlog.run_started", b"ckptlog\\u002erun_started")
    plain = f.report("c", {}, f"{ROOT}/c/y")
    lines = [f.report("c", {}, f"{ROOT}/c/x"), escaped, plain, f.report("a", {"acc": 1}, f"{ROOT}/a/c1")]
    split = RunReplay(SETTINGS, ["a"])
    split.feed([Rec(b"c" if i < 3 else b"a", raw, i) for i, raw in enumerate(lines)])
    assert split.folded == 3  # c's first report, the escaped record, a's report; not c's second report


def test_every_output_of_the_fold_has_its_effects() -> None:
    """A new output kind needs its effect in the story, or history would drop it with a KeyError."""
    assert set(_OF_OUTPUT) == set(OUTPUTS) - {CHECKPOINTS_MISSING.name}  # that one the service makes at a restore


def test_a_replay_again_from_the_same_snapshot_starts_from_the_snapshot_not_from_the_first_replay() -> None:
    """The split replay folds into the snapshot's run states; the one-fold replay after it (roots nest)
    must start from the snapshot as written, so each replay gets a snapshot of its own."""
    lines = [f.report("a", {"acc": 1}, f"{ROOT}/a/c1"), f.report("a", {"acc": 2}, f"{ROOT}/a/c2")]
    lines += [f.started("b", f"{ROOT}/a"), f.report("a", {"acc": 3}, f"{ROOT}/a/c3")]
    records = [Rec(b"a" if i != 2 else b"b", raw, i) for i, raw in enumerate(lines)]
    fold, expected = full_fold(records, "a")
    got = replayed(records, "a", snapshot_at=1)
    assert [(s.offset, _comparable(s.effects)) for s in got.steps["a"]] == [
        (o, _comparable(e)) for o, e in expected if o >= 1
    ]
    mine, theirs = got.fold.runs["a"], fold.runs["a"]
    assert canonical(run_view(mine)) == canonical(run_view(theirs))


def test_more_finishes_than_records_kept_make_the_replay_fold_every_run() -> None:
    """Expiry spans runs (contract §3): with one record kept, b's retirement expires a's record, so
    a's late report makes a new implicit run; the split replay (a alone, b in the context fold)
    cannot know which records expired, says it is not exact, and the whole replay answers."""
    kept1 = dataclasses.replace(SETTINGS, finished_runs_kept=1)
    lines = [f.report("a", {}, f"{ROOT}/a/c1"), f.finished("a"), f.report("b", {}), f.finished("b")]
    lines.append(f.report("a", {}, f"{ROOT}/a/c2"))
    records = [Rec(b"b" if b'"b"' in raw else b"a", raw, i) for i, raw in enumerate(lines)]
    whole = Fold(kept1)
    for rec in records:
        whole.apply(f.event(rec.value or b""))
    assert "a" in whole.runs and list(whole.finished) == ["b"]
    split = RunReplay(kept1, ["a"])
    split.feed(records)
    assert not split.exact()
    again = RunReplay(kept1, ["a"], whole=True)
    again.feed(records)
    assert run_view(again.state("a")) == run_view(whole.runs["a"])  # type: ignore[arg-type]
