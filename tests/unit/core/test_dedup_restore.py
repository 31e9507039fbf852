"""Deduplication through the fold and its snapshots (contract §3 "Deduplication", §6): hostile id
streams folded as real events, restored part-way from schema 7 snapshots, from chains of deltas,
from the `seen` list a schema 6 snapshot held, and restarted after a crash (the newest snapshot
object and the log since), against a model that keeps every applied id."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptlog.errors import SnapshotCorrupt
from ckptlog.events.decoded import DecodedEvent
from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.core.delta import Capture, decode_chain, sha256_hex
from ckptlog.processor.core.snapshot import (
    DELTA_FORMAT,
    FORMAT,
    SCHEMA_VERSION,
    Snapshot,
    canonical,
    decode,
    encode,
    of_fold,
)
from tests import factories as f
from tests.unit.core.test_dedup import IDS, PROFILE, RUN

ROOT = "file:///data"
MAX_DELTAS = 3
IDLE = [f"idle-{k}" for k in range(8)]


def reencoded(body: dict[str, Any], version: int) -> bytes:
    digest = hashlib.sha256(canonical(body)).hexdigest()
    return canonical({"checksum": f"sha256:{digest}", "format": FORMAT, "schema_version": version, "snapshot": body})


def schema_6(fold: Fold, applied: dict[str, list[str]], offset: int = 0) -> bytes:
    """The snapshot a schema 6 build wrote of the same runs: each run's last `dedup_window` applied
    ids, oldest first, in `seen`."""
    body = json.loads(encode(of_fold(fold, "t", 0, offset)))["snapshot"]
    for run_id, run in body["runs"].items():
        del run["dedup"]
        run["seen"] = applied[run_id][-fold.settings.dedup_window :]
    return reencoded(body, 6)


class Processor:
    """One partition's fold as the processor keeps it: snapshot objects on a chain (a base, or a delta
    on the chain it restored from while the chain takes one), and the events applied since the newest."""

    def __init__(self, settings: FoldSettings, applied: dict[str, list[str]]) -> None:
        self.fold = Fold(settings, track_changes=True)
        self.applied = applied  # each run's applied ids (what a schema 6 snapshot's `seen` is cut from)
        self.objects: list[bytes] = []  # the chain the newest snapshot object closes
        self.since: list[DecodedEvent] = []  # applied after it: what a restart replays
        self.offset = 0  # the next offset of the log

    def apply(self, event: DecodedEvent) -> Any:
        self.since.append(event)
        self.offset += 1
        return self.fold.apply(event)

    def snapshot(self, kind: int | str) -> None:
        """Write a snapshot (`7`, `6`: a full one of that schema; "delta": the processor's next object)
        and restore from it, as a new processor would."""
        full = encode(of_fold(self.fold, "t", 0, self.offset))
        if kind == "delta":
            chain = decode_chain(self.objects).chain if self.objects else None
            on = chain if chain is not None and chain.takes_delta(MAX_DELTAS, SCHEMA_VERSION) else None
            capture = Capture(self.fold, "t", 0, self.offset, on)
            while capture.step():
                pass
            self.objects = [*self.objects, capture.encoded()] if on is not None else [capture.encoded()]
        else:
            self.objects = [full if kind == 7 else schema_6(self.fold, self.applied, self.offset)]
        self.since = []
        self.fold = self.restored()
        if kind != 6:
            assert encode(of_fold(self.fold, "t", 0, self.offset)) == full

    def crash(self) -> None:
        """Restart from the newest snapshot object and replay the log since: the very same state."""
        before = encode(of_fold(self.fold, "t", 0, 0))
        self.fold = self.restored() if self.objects else Fold(self.fold.settings, track_changes=True)
        for event in self.since:
            self.fold.apply(event)
        assert encode(of_fold(self.fold, "t", 0, 0)) == before

    def restored(self) -> Fold:
        snap = decode_chain(self.objects)
        return Fold(
            snap.settings,
            snap.runs,
            refused=snap.refused,
            finished=snap.finished,
            retired=snap.retired,
            track_changes=True,
        )


@PROFILE
@given(
    st.lists(
        st.tuples(
            st.sampled_from([RUN, "other"]),
            IDS,
            st.sampled_from([None, None, None, None, 6, 7, "delta", "delta", "crash"]),
        ),
        max_size=80,
    ),
    st.integers(1, 6),
)
def test_the_fold_never_drops_a_new_event_across_restores(
    steps: list[tuple[str, Any, int | str | None]], window: int
) -> None:
    """Metrics-only reports (always applied unless a repeat) of two runs sharing ids; after some,
    the fold is restored from a full snapshot of this schema or of schema 6, from the processor's
    chain of a base and deltas (a delta holds only the runs changed since the object before it, so
    idle runs' states come from the base, and the chain grows to `MAX_DELTAS`), or restarted after
    a crash."""
    applied: dict[str, list[str]] = {RUN: [], "other": []}
    processor = Processor(FoldSettings(default_root=ROOT, dedup_window=window), applied)
    for run_id in IDLE:
        applied[run_id] = [f"ck1:r:0:0:{run_id}", f"ck1:r:0:1:{run_id}", f"x-{run_id}"]
        for event_id in applied[run_id]:
            assert processor.apply(f.event(f.report(run_id, {"loss": 1}, event_id=event_id))).outputs
    for run_id, drawn, then in steps:
        mine = applied[run_id]
        event_id = drawn if isinstance(drawn, str) else mine[-1 - drawn % len(mine)] if mine else "first"
        effects = processor.apply(f.event(f.report(run_id, {"loss": 1}, event_id=event_id)))
        assert effects.rejection is None
        if effects.duplicate:
            assert event_id in mine and not effects.outputs
        else:
            assert event_id not in mine[-window:] and effects.outputs
            mine.append(event_id)
        if then == "crash":
            processor.crash()
        elif then is not None:
            processor.snapshot(then)
    if applied[RUN]:
        assert processor.fold.runs[RUN].report_count == len(applied[RUN])
    for run_id in IDLE:  # a schema 6 snapshot kept only each run's last W ids
        again = applied[run_id][-window:] if any(then == 6 for *_, then in steps) else applied[run_id]
        assert all(processor.apply(f.event(f.report(run_id, {}, event_id=i))).duplicate for i in again)


def test_a_long_run_remembers_its_reports_in_a_mark() -> None:
    """5,000 reports of a Reporter at keep=5, each eviction's deletion completed: the run remembers
    its run_started's id and one range, and knows its first report after all of them."""
    fold = Fold(FoldSettings(default_root=ROOT, dedup_window=64))
    fold.apply(f.event(f.started(RUN, f"{ROOT}/{RUN}", keep=5, attr="acc", event_id="start")))
    for n in range(5000):
        raw = f.report(RUN, {"acc": n % 7}, f"{ROOT}/{RUN}/c{n}", event_id=f"ck1:r:0:{n}:{RUN}")
        for done in fold.apply(f.event(raw)).deletions:
            fold.apply(f.event(f.settled(RUN, [(done.path, done.eviction)], event_id=f"deleted:{n}")))
    seen = fold.runs[RUN].seen
    assert seen.foreign_ids() == ["start"] and list(seen.marks) == ["r:0"] and seen.applied == 5001
    assert (seen.marks["r:0"].lo, seen.marks["r:0"].hi, seen.marks["r:0"].blocks) == (0, 4999, None)
    again = fold.apply(f.event(f.report(RUN, {"acc": 0}, f"{ROOT}/{RUN}/c0", event_id=f"ck1:r:0:0:{RUN}")))
    assert again.duplicate and fold.runs[RUN].report_count == 5000


def test_a_numbered_completion_is_not_remembered_and_its_redelivery_changes_nothing() -> None:
    fold = Fold(FoldSettings(default_root=ROOT))
    fold.apply(f.event(f.started(RUN, f"{ROOT}/{RUN}", keep=1)))
    fold.apply(f.event(f.report(RUN, {}, f"{ROOT}/{RUN}/a")))
    (evicted,) = fold.apply(f.event(f.report(RUN, {}, f"{ROOT}/{RUN}/b"))).deletions
    done = f.event(f.settled(RUN, [(evicted.path, evicted.eviction)], event_id="deleted:x"))
    first = fold.apply(done)
    before = encode(of_fold(fold, "t", 0, 0))
    assert first.outputs and "deleted:x" not in fold.runs[RUN].seen.foreign_set
    again = fold.apply(done)
    assert not again.outputs and not again.deletions and again.rejection is None
    assert encode(of_fold(fold, "t", 0, 0)) == before


def test_an_unnumbered_completion_is_remembered() -> None:
    """A v2 completion settles whichever eviction of the path is outstanding: its redelivery after
    the path was reused and evicted again must not settle the new eviction."""
    fold = Fold(FoldSettings(default_root=ROOT))
    fold.apply(f.event(f.started(RUN, f"{ROOT}/{RUN}", keep=1)))
    fold.apply(f.event(f.report(RUN, {}, f"{ROOT}/{RUN}/a")))
    fold.apply(f.event(f.report(RUN, {}, f"{ROOT}/{RUN}/b")))  # evicts a
    done = f.event(f.deleted_many(RUN, [f"{ROOT}/{RUN}/a"], event_id="v2"))
    assert fold.apply(done).outputs
    fold.apply(f.event(f.report(RUN, {}, f"{ROOT}/{RUN}/a")))  # a again, evicting b
    fold.apply(f.event(f.report(RUN, {}, f"{ROOT}/{RUN}/c")))  # and a again
    assert fold.apply(done).duplicate and f"{ROOT}/{RUN}/a" in fold.runs[RUN].outstanding


def test_a_snapshot_with_marks_and_out_of_order_ids_round_trips_to_the_same_bytes() -> None:
    fold = Fold(FoldSettings(default_root=ROOT, dedup_window=8))
    for event_id in ("s", f"ck1:r:0:0:{RUN}", f"ck1:r:0:1:{RUN}", f"ck1:r:0:5:{RUN}", f"ck1:g:1:{RUN}", "x"):
        fold.apply(f.event(f.report(RUN, {}, event_id=event_id)))
    data = encode(of_fold(fold, "t", 0, 0))
    body = json.loads(data)
    assert body["schema_version"] == SCHEMA_VERSION == 7
    assert body["snapshot"]["runs"][RUN]["dedup"] == {
        "applied": 6,
        "marks": [["r:0", 0, 1, 4, [[4, [5]]]], ["g", 1, 1, 5, []]],
        "foreign": ["s", "x"],
    }
    assert encode(decode(data)) == data


@pytest.mark.parametrize(
    "dedup",
    [
        {"applied": 1, "marks": [["r:0", 3, 1, 1, []]], "foreign": []},
        {"applied": 1, "marks": [], "foreign": [["not", "a", "string"]]},
        {"applied": "1", "marks": [], "foreign": []},
        {"marks": [], "foreign": []},
    ],
)
def test_a_dedup_state_that_is_not_one_is_a_corrupt_snapshot(dedup: dict[str, Any]) -> None:
    fold = Fold(FoldSettings(default_root=ROOT))
    fold.apply(f.event(f.report(RUN, {})))
    body = json.loads(encode(Snapshot("t", 0, 0, fold.settings, fold.runs)))["snapshot"]
    body["runs"][RUN]["dedup"] = dedup
    with pytest.raises(SnapshotCorrupt, match="content invalid"):
        decode(reencoded(body, SCHEMA_VERSION))


def test_a_schema_6_chain_restores_with_its_ids_known_and_takes_no_delta() -> None:
    """A base and a delta a schema 6 build wrote (each run's ids in `seen`): merged as JSON and read
    as schema 6, every id in the lists is known; the chain stays of schema 6, so the next snapshot
    is a base (a delta holds this build's run records)."""
    fold = Fold(FoldSettings(default_root=ROOT, dedup_window=8))
    applied = {RUN: [f"ck1:r:0:{n}:{RUN}" for n in range(3)] + ["x"], "other": ["o1"]}
    for event_id in applied[RUN][:2]:
        fold.apply(f.event(f.report(RUN, {}, event_id=event_id)))
    base = json.loads(encode(of_fold(fold, "t", 0, 2)))["snapshot"]
    for event_id in applied[RUN][2:]:
        fold.apply(f.event(f.report(RUN, {}, event_id=event_id)))
    fold.apply(f.event(f.report("other", {}, event_id="o1")))
    head = json.loads(encode(of_fold(fold, "t", 0, 5)))["snapshot"]
    for body, runs in ((base, [RUN]), (head, [RUN, "other"])):
        for run_id in runs:
            del body["runs"][run_id]["dedup"]
            body["runs"][run_id]["seen"] = applied[run_id][: 2 if body is base else None]
    base_bytes = reencoded(base, 6)
    link = {"next_offset": 2, "sha256": sha256_hex(base_bytes)}
    tables = {name: {"drop": [], "put": {}} for name in ("refused", "finished", "symlinked", "retired")}
    delta = {
        **{key: head[key] for key in ("processor_version", "topic", "partition", "next_offset")},
        "base": link,
        "previous": link,
        "sequence": 1,
        "settings": head["settings"],
        "runs": {"drop": [], "put": head["runs"]},
        **tables,
    }
    digest = hashlib.sha256(canonical(delta)).hexdigest()
    delta_bytes = canonical(
        {"checksum": f"sha256:{digest}", "format": DELTA_FORMAT, "schema_version": 6, "delta": delta}
    )
    snap = decode_chain([base_bytes, delta_bytes])
    assert snap.chain is not None and snap.chain.deltas == 1 and snap.chain.schema_version == 6
    assert not snap.chain.takes_delta(32, SCHEMA_VERSION)
    back = Fold(snap.settings, snap.runs)
    for run_id, ids in applied.items():
        assert all(back.apply(f.event(f.report(run_id, {}, event_id=i))).duplicate for i in ids)
    assert list(back.runs[RUN].seen.marks) == ["r:0"] and back.runs[RUN].seen.foreign_ids() == ["x"]
