"""Restore from what the previous build wrote (contract §6, schema 7 over 6): a schema 6 base and its
delta, the very bytes that build wrote (tests/unit/core/schema6/: `make.py` made them from `log.py`'s
log), read under this build. Every id in a run's list is known, no other id becomes known, the rest
of the state is the one this build folds from the same log, and the next snapshot is a base of
schema 7 that restores to the same bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from ckptlog.events.schema import SNAPSHOT_SCHEMA
from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.core.delta import Capture, decode_chain
from ckptlog.processor.core.snapshot import SCHEMA_VERSION, Snapshot, canonical, decode, encode, of_fold
from tests import factories as f
from tests.unit.core.schema6.log import BASE_AT, LOG, ROOT, WINDOW

HERE = Path(__file__).resolve().parent / "schema6"
BASE, DELTA = (HERE / "base.json").read_bytes(), (HERE / "delta.json").read_bytes()


def fold_of(snap: Snapshot) -> Fold:
    return Fold(
        snap.settings, snap.runs, refused=snap.refused, finished=snap.finished, retired=snap.retired, track_changes=True
    )


def lists(*objects: bytes) -> dict[str, list[str]]:
    """Each run's `seen` as the chain's objects wrote it (the newest object's record of a run wins)."""
    out: dict[str, list[str]] = {}
    for data in objects:
        doc = json.loads(data)
        runs = doc["snapshot"]["runs"] if "snapshot" in doc else doc["delta"]["runs"]["put"]
        out.update({run_id: run["seen"] for run_id, run in runs.items()})
    return out


def without_dedup(fold: Fold) -> Any:
    """The fold's snapshot document without what schema 7 changed: each run's and retired state's `dedup`."""
    body = json.loads(encode(of_fold(fold, "t", 0, len(LOG))))["snapshot"]
    del body["processor_version"]
    for table in (body["runs"], body["retired"]):
        for state in table.values():
            del state["dedup"]
    return body


def test_the_files_are_a_schema_6_chain_with_ids_in_lists() -> None:
    base, delta = json.loads(BASE), json.loads(DELTA)
    assert (base["format"], base["schema_version"], delta["format"], delta["schema_version"]) == (
        "ckptlog.snapshot",
        6,
        "ckptlog.snapshot.delta",
        6,
    )
    assert base["snapshot"]["next_offset"] == BASE_AT and delta["delta"]["next_offset"] == len(LOG)
    assert base["snapshot"]["retired"]["b"]["seen"] == [] and len(lists(BASE)["a"]) == WINDOW
    validator = Draft202012Validator(SNAPSHOT_SCHEMA)  # schemas/snapshot.json still describes what 6 wrote
    validator.validate(base)
    validator.validate(delta)


@pytest.mark.parametrize("objects", [[BASE], [BASE, DELTA]], ids=["base", "base+delta"])
def test_every_listed_id_is_known_and_no_other(objects: list[bytes]) -> None:
    snap = decode_chain(objects)
    assert snap.chain is not None and snap.chain.schema_version == 6 and snap.chain.deltas == len(objects) - 1
    fold = fold_of(snap)
    events = [json.loads(raw) for raw in LOG[: snap.next_offset]]
    for run_id, ids in lists(*objects).items():
        seen = fold.runs[run_id].seen
        assert all(seen.known(i, run_id) for i in ids)
        unlisted = [e["id"] for e in events if e["subject"] == run_id and e["id"] not in ids]
        assert unlisted or run_id == "c"
        assert not any(seen.known(i, run_id) for i in unlisted), "an id applied before the list is not known"
        assert not seen.known(f"ck1:r:0:99:{run_id}", run_id) and not seen.known(f"never-{run_id}", run_id)
    for run_id, ids in lists(*objects).items():  # through the fold: each a duplicate, nothing changes
        before = encode(of_fold(fold, "t", 0, 0))
        assert all(fold.apply(f.event(f.report(run_id, {}, event_id=i))).duplicate for i in ids)
        assert encode(of_fold(fold, "t", 0, 0)) == before


def test_the_state_beside_dedup_is_the_one_this_build_folds() -> None:
    fold = fold_of(decode_chain([BASE, DELTA]))
    fresh = Fold(FoldSettings(default_root=ROOT, dedup_window=WINDOW))
    for raw in LOG:
        assert fresh.apply(f.event(raw)).rejection is None
    assert canonical(without_dedup(fold)) == canonical(without_dedup(fresh))  # key order too
    held, folded = json.loads(fold.retired["b"]), json.loads(fresh.retired["b"])
    assert list(held) == list(folded) and folded["dedup"]["marks"]  # this build's keeps b's range
    assert held == {**folded, "dedup": {"applied": 0, "marks": [], "foreign": []}}  # schema 6's: no id


def test_the_ranges_go_on_and_the_next_snapshot_is_a_schema_7_base() -> None:
    snap = decode_chain([BASE, DELTA])
    assert snap.chain is not None and not snap.chain.takes_delta(32, SCHEMA_VERSION)
    fold = fold_of(snap)
    mark = fold.runs["a"].seen.marks["r:0"]
    assert (mark.lo, mark.hi, mark.numbers()) == (10, 12, [14])  # the delta's list: 10-12, then 14 apart
    assert fold.apply(f.event(f.report("a", {"acc": 13}, f"{ROOT}/a/c13", event_id="ck1:r:0:13:a"))).outputs
    assert (mark.lo, mark.hi) == (10, 14) and not mark.numbers()  # 13 closed the gap: 14 taken into the range
    assert fold.apply(f.event(f.report("a", {}, event_id="ck1:r:0:14:a"))).duplicate
    capture = Capture(fold, "t", 0, len(LOG) + 2, None)  # what the processor writes: a base
    while capture.step():
        pass
    data = capture.encoded()
    assert json.loads(data)["schema_version"] == SCHEMA_VERSION == 7
    again = decode_chain([data])
    assert encode(again) == encode(of_fold(fold, "t", 0, len(LOG) + 2)) and encode(decode(data)) == data
    assert again.chain is not None and again.chain.takes_delta(32, SCHEMA_VERSION)


def test_a_run_retired_under_schema_6_is_reopened_remembering_no_id() -> None:
    """Contract §6: schema 6 kept a retired run's state with an empty list; reopened, the run
    recognises none of its earlier events, as under the build that retired it."""
    fold = fold_of(decode_chain([BASE, DELTA]))
    reopen = fold.apply(f.event(f.reopened("b", event_id="reopen-b")))
    assert reopen.rejection is None and "b" in fold.runs and fold.runs["b"].reopened == 1
    again = fold.apply(f.event(f.report("b", {"acc": 0}, event_id="ck1:r:0:0:b")))
    assert not again.duplicate and again.outputs and fold.runs["b"].report_count == 5
    fresh = Fold(FoldSettings(default_root=ROOT, dedup_window=WINDOW))  # retired under this build: its range kept
    for raw in [*LOG, f.reopened("b", event_id="reopen-b"), f.report("b", {"acc": 0}, event_id="ck1:r:0:0:b")]:
        effects = fresh.apply(f.event(raw))
    assert effects.duplicate and fresh.runs["b"].report_count == 4
