"""Incremental snapshots (contract §6, core/delta.py): a base and its deltas restore to exactly the
state a full snapshot of the same moment holds, byte for byte, order of every table included; any
damaged, missing or foreign link is refused."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlog.errors import SnapshotCorrupt
from ckptlog.processor.core import Fold
from ckptlog.processor.core.chain import Chain
from ckptlog.processor.core.delta import Capture, changes, decode_chain, sha256_hex
from ckptlog.processor.core.snapshot import SCHEMA_VERSION, canonical, decode, encode, of_fold
from tests import factories as f
from tests.unit.core.test_fold_properties import ROOT, SETTINGS

RUNS = ("a", "b", "c")


@st.composite
def lives(draw: Any) -> list[bytes]:
    """Runs that start (some under a root nesting with another's: refused), report, settle, finish,
    are forgotten, reopened, refused for a link to their root (`root_refused`, also for another
    root: a no-op) and start again, so every table (`runs`, `refused`, `finished`, `symlinked`,
    `retired`) gains, changes, loses and re-gains keys, and states move between them."""
    out: list[bytes] = []
    kinds = ["start", "start", "nested", "ckpt", "metrics", "settle", "finish", "forget", "reopen", "reopen", "link"]
    for n in range(draw(st.integers(1, 60))):
        run = draw(st.sampled_from(RUNS))
        kind = draw(st.sampled_from(kinds))
        if kind == "start":
            out.append(f.started(run, f"{ROOT}/{run}", keep=draw(st.sampled_from([None, 1, 2])), event_id=f"s{n}"))
        elif kind == "nested":  # refused: nests with another run's root (or accepted when that one is gone)
            out.append(f.started(run, f"{ROOT}/{draw(st.sampled_from(RUNS))}/in", event_id=f"s{n}"))
        elif kind == "ckpt":
            out.append(f.report(run, {"acc": draw(st.integers(0, 9))}, f"{ROOT}/{run}/c{n}", event_id=f"e{n}"))
        elif kind == "metrics":  # a foreign id, or a structured one (a mark in the run's dedup state)
            out.append(f.report(run, {"loss": n}, event_id=draw(st.sampled_from([f"e{n}", f"ck1:r:0:{n}:{run}"]))))
        elif kind == "settle":
            target = draw(st.integers(0, n))
            out.append(f.settled(run, deleted=[(f"{ROOT}/{run}/c{target}", draw(st.integers(0, 3)))], event_id=f"e{n}"))
        elif kind == "finish":
            out.append(f.finished(run, keep=draw(st.sampled_from([None, "best"])), event_id=f"f{n}"))
        elif kind == "forget":
            out.append(f.forgotten(run, event_id=f"x{n}"))
        elif kind == "reopen":  # a retired run's state back in `runs` (or refused: unknown, forgotten, unfinished)
            out.append(f.reopened(run, event_id=f"o{n}"))
        else:  # its own root (refused for good, its state gone to `symlinked`) or another's (a no-op)
            root = f"{ROOT}/{draw(st.sampled_from([run, run, *RUNS]))}"
            out.append(f.root_refused(run, root, event_id=f"l{n}"))
    return out


def full(fold: Fold, offset: int) -> bytes:
    return encode(of_fold(fold, "t", 0, offset))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lives(),
    st.integers(1, 7),
    st.integers(0, 6),
    st.integers(1, 4),
    st.integers(0, 2),
    st.randoms(use_true_random=False),
)
def test_a_base_and_its_deltas_restore_to_the_full_state_byte_for_byte(
    lines: list[bytes], every: int, max_deltas: int, lag: int, kept: int, rnd: Any
) -> None:
    """Snapshot every `every` events, a delta on the chain while it takes one; each capture is
    finished only `lag` events later, encoding its runs in random steps between them (copy on write).
    Finished records expire soon (`kept`), so run ids come back, at the end of the tables."""
    fold = Fold(dataclasses.replace(SETTINGS, finished_runs_kept=kept), track_changes=True)
    objects: list[bytes] = []
    chain: Chain | None = None
    capture: tuple[Capture, bytes] | None = None
    for offset, raw in enumerate(lines, 1):
        fold.apply(f.event(raw))
        if capture is not None:
            for _ in range(rnd.randint(0, 2)):
                capture[0].step()
            if offset % every == lag % every:
                chain, objects = _finish(capture, objects)
                capture = None
        if capture is None and offset % every == 0:
            on = chain if chain is not None and chain.takes_delta(max_deltas, SCHEMA_VERSION) else None
            capture = (Capture(fold, "t", 0, offset, on), full(fold, offset))
    if capture is not None:
        _finish(capture, objects)


def _finish(capture: tuple[Capture, bytes], objects: list[bytes]) -> tuple[Chain, list[bytes]]:
    taken, expected = capture
    while taken.step():
        pass
    data = taken.encoded()
    objects = [*objects, data] if taken.is_delta else [data]
    restored = decode_chain(objects)
    assert encode(restored) == expected  # the state of the capture's moment, byte for byte
    if not taken.is_delta:  # a base is the full snapshot, which is canonical() of its document (retired spliced)
        assert data == expected == canonical(json.loads(expected))
    assert restored.chain is not None and restored.chain.deltas == len(objects) - 1
    assert taken.fold.watch is None
    return restored.chain, objects


def test_changes_drop_and_put_back_the_tail_in_order() -> None:
    before = {"a": 1, "z": 0, "b": 2, "c": 3, "d": 4}  # "z" never changes
    after = dict(before)
    del after["b"]  # gone
    after["a"] = 10  # changed in place
    del after["c"]
    after["c"] = 30  # removed and added again: now last
    after["e"] = 5  # new
    after["d"] = 40  # changed in place, but now inside the tail of changed keys
    changed = dict.fromkeys(["e", "a", "b", "c", "d"])
    drop, put = changes(after, changed)
    rebuilt = dict(before)
    for key in drop:
        rebuilt.pop(key, None)
    rebuilt.update({key: after[key] for key in put})
    assert list(rebuilt.items()) == list(after.items())
    assert put[-3:] == ["d", "c", "e"] and "a" in put and set(drop) == {"b", "c", "d", "e"}


def _chain_of(count: int) -> list[bytes]:
    """A base and `count` deltas, each changing run `r`."""
    fold = Fold(SETTINGS, track_changes=True)
    fold.apply(f.event(f.started("r", f"{ROOT}/r", event_id="s")))
    fold.apply(f.event(f.started("q", f"{ROOT}/q", event_id="sq")))
    objects: list[bytes] = []
    chain: Chain | None = None
    for n in range(count + 1):
        fold.apply(f.event(f.report("r", {"n": n}, f"{ROOT}/r/c{n}", event_id=f"e{n}")))
        capture = Capture(fold, "t", 0, 10 + n, chain)
        while capture.step():
            pass
        objects.append(capture.encoded())
        chain = decode_chain(objects).chain
    return objects


def _rewritten(data: bytes, change: Any) -> bytes:
    """A delta whose body `change` altered, checksummed again (as if written so, not damaged)."""
    outer = json.loads(data)
    change(outer["delta"])
    body = canonical(outer["delta"])
    return canonical({**outer, "checksum": "sha256:" + sha256_hex(body), "delta": json.loads(body)})


def test_a_delta_writes_only_what_changed() -> None:
    objects = _chain_of(2)
    delta = json.loads(objects[1])["delta"]
    assert list(delta["runs"]["put"]) == ["r"] and delta["runs"]["drop"] == []
    assert delta["sequence"] == 1 and delta["base"]["sha256"] == sha256_hex(objects[0])
    assert json.loads(objects[2])["delta"]["previous"]["sha256"] == sha256_hex(objects[1])


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda o: [o[0], o[2]], "previous"),  # a lost delta
        (lambda o: [o[0], o[2], o[1]], "previous"),  # out of order
        (lambda o: [o[0], o[1][:-9]], "not valid JSON"),  # torn
        (lambda o: [o[0], o[1].replace(b'"n":0', b'"n":7')], "checksum mismatch"),  # a flipped value
        (lambda o: [_chain_of(1)[0].replace(b'"q"', b'"Q"'), o[1]], "checksum mismatch"),
        (lambda o: [decode_base_again(o[0]), o[1]], "base"),  # another base (same state, other bytes)
        (lambda o: [o[0], _rewritten(o[1], lambda d: d.update(sequence=2))], "sequence"),
        (lambda o: [o[0], _rewritten(o[1], lambda d: d.update(partition=1))], "partition"),
        (lambda o: [o[0], _rewritten(o[1], lambda d: d["settings"].update(dedup_window=7))], "settings"),
        (lambda o: [o[0], _rewritten(o[1], lambda d: d.update(next_offset=10))], "not after"),
        (lambda o: [o[0], _rewritten(o[1], lambda d: d["runs"].update(drop={}))], "content invalid"),
        (lambda o: [o[1]], "ckptlog.snapshot"),  # a delta is no base
        (lambda o: [o[0], o[0]], "ckptlog.snapshot.delta"),  # nor a base a delta
    ],
)
def test_a_chain_that_does_not_hold_together_is_refused(damage: Any, why: str) -> None:
    objects = _chain_of(2)
    assert encode(decode_chain(objects)).count(b'"n":2') == 1
    with pytest.raises(SnapshotCorrupt, match=why):
        decode_chain(damage(objects))


def decode_base_again(data: bytes) -> bytes:
    """The same state as another base object: a different processor_version, so different bytes."""
    snapshot = decode(data)
    snapshot.processor_version = "other"
    return encode(snapshot)


def test_a_delta_is_taken_at_its_moment_whatever_the_fold_does_next() -> None:
    """Copy on write: a run the fold changes (or retires) before the capture reached it is encoded
    as it was; a run the capture already encoded is not encoded again."""
    fold = Fold(SETTINGS, track_changes=True)
    for run in ("a", "b"):
        fold.apply(f.event(f.started(run, f"{ROOT}/{run}", event_id=f"s-{run}")))
    base = Capture(fold, "t", 0, 2, None)
    while base.step():
        pass
    objects = [base.encoded()]
    for run in ("a", "b"):
        fold.apply(f.event(f.report(run, {"x": 1}, f"{ROOT}/{run}/c1", event_id=f"r-{run}")))
    expected = full(fold, 4)
    capture = Capture(fold, "t", 0, 4, decode_chain(objects).chain)
    assert capture.step()  # "a" encoded
    fold.apply(f.event(f.report("a", {"x": 2}, f"{ROOT}/a/c2", event_id="r2-a")))
    fold.apply(f.event(f.finished("b", event_id="f-b")))  # b retires before the capture reached it
    assert "b" not in fold.runs and not capture.step()
    restored = decode_chain([*objects, capture.encoded()])
    assert encode(restored) == expected and "b" in restored.runs
    assert list(fold.changed or {}) == ["a", "b"]  # what the next delta carries


@settings(max_examples=50, deadline=None)
@given(lives())
def test_tracking_changes_and_a_capture_in_progress_change_no_output(lines: list[bytes]) -> None:
    """The fold decides alike whether it notes its changes and is watched, or not (contract §3)."""
    plain, tracked = Fold(SETTINGS), Fold(SETTINGS, track_changes=True)
    capture = Capture(tracked, "t", 0, 0, None)
    for raw in lines:
        a, b = plain.apply(f.event(raw)), tracked.apply(f.event(raw))
        assert (a.outputs, a.deletions, a.rejection) == (b.outputs, b.deletions, b.rejection)
    assert full(plain, 1) == full(tracked, 1) and plain.changed is None
    assert set(tracked.changed or {}) <= set(RUNS)
    while capture.step():
        pass


def test_the_settings_of_a_chain_are_read_from_its_newest_object() -> None:
    """A history replay from the log start folds with the settings of the newest restore point (explain)."""
    from ckptlog.processor.core.snapshot import decode_settings

    objects = _chain_of(1)
    assert decode_settings(objects[1]) == decode_settings(objects[0]) == SETTINGS


def test_a_chain_takes_deltas_until_it_is_long_heavy_or_of_an_older_schema() -> None:
    chain = Chain.based(10, "a" * 64, 1000, SCHEMA_VERSION)
    assert chain.takes_delta(2, SCHEMA_VERSION) and not chain.takes_delta(0, SCHEMA_VERSION)
    light = chain.extended(20, "b" * 64, 100).extended(30, "c" * 64, 100)
    assert (light.deltas, light.delta_bytes, light.tip_offset, light.base_offset) == (2, 200, 30, 10)
    assert light.takes_delta(3, SCHEMA_VERSION) and not light.takes_delta(2, SCHEMA_VERSION)
    assert not chain.extended(20, "b" * 64, 500).takes_delta(32, SCHEMA_VERSION)  # half the base: compact
    assert not Chain.based(10, "a" * 64, 1000, SCHEMA_VERSION - 1).takes_delta(32, SCHEMA_VERSION)


def test_a_final_snapshot_goes_on_a_chain_past_its_bounds_but_not_without_end() -> None:
    """A revocation's or a stop's snapshot is a delta whenever the chain can take one: compaction can
    wait for the next owner (a base of 100,000 runs took 4.1 s at a stop). Not on a chain of another
    schema, not with deltas off, and a chain stops at FINAL_STRETCH times either bound."""
    from ckptlog.processor.core.chain import FINAL_STRETCH

    heavy = Chain.based(10, "a" * 64, 1000, SCHEMA_VERSION).extended(20, "b" * 64, 900)
    assert not heavy.takes_delta(8, SCHEMA_VERSION) and heavy.takes_delta(8, SCHEMA_VERSION, final=True)
    heavier = heavy.extended(30, "c" * 64, 100)  # deltas weigh the base: a restore would read it twice
    assert not heavier.takes_delta(8, SCHEMA_VERSION, final=True)
    long = Chain.based(10, "a" * 64, 1000, SCHEMA_VERSION)
    for n in range(FINAL_STRETCH * 2):
        assert long.takes_delta(2, SCHEMA_VERSION, final=True), n
        long = long.extended(20 + 10 * n, "c" * 64, 1)
    assert long.deltas == FINAL_STRETCH * 2 and not long.takes_delta(2, SCHEMA_VERSION, final=True)
    assert not long.takes_delta(2, SCHEMA_VERSION)
    assert not Chain.based(10, "a" * 64, 1000, SCHEMA_VERSION).takes_delta(0, SCHEMA_VERSION, final=True)  # off
    older = Chain.based(10, "a" * 64, 1000, SCHEMA_VERSION - 1)
    assert not older.takes_delta(32, SCHEMA_VERSION, final=True)


SEGMENT = st.one_of(
    st.sampled_from(["", ".", "..", ".ckptlog-run", "a", "run-1", "x.y", "a b", "ü", "%41", "a::b", "*", "-"]),
    st.text(alphabet="ab._-/%:\\ü?", max_size=6),
    st.text(alphabet="a", min_size=254, max_size=257),
)


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(["file://", "FILE://", "", "s3://", "memory://", "gs://", "file:", "s3:/"]),
    st.lists(SEGMENT, max_size=4),
    st.booleans(),
)
def test_a_root_prefix_by_its_parent_is_the_whole_parse(protocol: str, segments: list[str], slash: bool) -> None:
    """state.root_prefix's shortcut (a known parent plus a plain last name) spells every root as
    parsing it whole does, and refuses what that refuses (restores parse 100,000 roots)."""
    from ckptlog.events.paths import UnsafePath, key_of, parse_url
    from ckptlog.processor.core.state import root_prefix

    root = protocol + ("/" if slash else "") + "/".join(segments)
    for _ in range(2):  # the second time, the parent is known
        try:
            want: str | type = key_of(parse_url(root)).rstrip("/") + "/" if root else "\0"
        except UnsafePath:
            want = UnsafePath
        try:
            got: str | type = root_prefix(root)
        except UnsafePath:
            got = UnsafePath
        assert got == want, root


def test_a_base_and_a_delta_holding_every_table_match_the_published_schema() -> None:
    """schemas/snapshot.json describes both kinds of object, every field they write included."""
    from jsonschema import Draft202012Validator

    from ckptlog.events.schema import SNAPSHOT_SCHEMA

    fold = Fold(SETTINGS, track_changes=True)
    chain: Chain | None = None
    objects: list[bytes] = []
    for lines in (
        [f.started("a", f"{ROOT}/a", event_id="s-a"), f.started("b", f"{ROOT}/a/in", event_id="s-b")],  # b refused
        [f.started("c", f"{ROOT}/c", event_id="s-c"), f.finished("c", event_id="f-c")],  # c retired, reopenable
        [f.started("d", f"{ROOT}/d", event_id="s-d"), f.root_refused("d", f"{ROOT}/d", event_id="l-d")],
    ):
        for raw in lines:
            assert fold.apply(f.event(raw)).rejection is None or b'"b"' in raw
        capture = Capture(fold, "t", 0, len(objects) + 1, chain)
        while capture.step():
            pass
        objects.append(capture.encoded())
        chain = decode_chain(objects).chain
    validator = Draft202012Validator(SNAPSHOT_SCHEMA)
    defs = SNAPSHOT_SCHEMA["$defs"]
    for data, kind, body in zip(objects, ["base", "delta", "delta"], ["snapshot", "delta", "delta"], strict=True):
        document = json.loads(data)
        validator.validate(document)
        assert set(document[body]) <= set(defs[kind]["properties"][body]["properties"])
    last = json.loads(objects[-1])["delta"]
    assert list(last["symlinked"]["put"]) == ["d"] and list(json.loads(objects[1])["delta"]["retired"]["put"]) == ["c"]
    assert set(json.loads(objects[0])["snapshot"]["refused"]) == {"b"}
