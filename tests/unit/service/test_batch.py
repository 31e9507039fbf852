"""BatchFolder: the hot path from consumed records to records to publish."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ckptlog.events.rejections import Rejection
from ckptlog.kafka.records import Header, PartitionId
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.core.view import run_view
from ckptlog.processor.service.batch import Batch, BatchFolder
from ckptlog.processor.service.harness import workload
from ckptlog.processor.service.records import RecordFactory, TopicNames

NAMES = TopicNames("in", "ckpt", "val", "wm", "state", "dlq")


@dataclass(frozen=True)
class Rec:
    offset: int
    value: bytes | None
    key: bytes | None = None
    topic: str = "in"
    partition: int = 0
    headers: tuple[Header, ...] = ()


def records(lines: list[bytes], start: int = 0) -> list[Rec]:
    return [Rec(start + i, line, json.loads(line)["subject"].encode()) for i, line in enumerate(lines)]


def folder() -> BatchFolder:
    return BatchFolder(Fold(FoldSettings()), RecordFactory(NAMES, PartitionId("in", 0)))


LINES = workload("file:///r", runs=2, reports=12, keep=1, validation_share=0.0)


def test_views_are_coalesced_once_per_changed_run_per_batch() -> None:
    batch = folder().fold_records(records(LINES), publish_from=0)
    views = [r for r in batch.records if r.topic == "state"]
    assert sorted(r.key for r in views) == [b"run-0", b"run-1"]
    assert json.loads(views[0].value)["committed"] == 6
    assert batch.live and batch.applied == len(LINES) and batch.deletions


def test_records_below_publish_from_only_rebuild_state() -> None:
    f = folder()
    batch = f.fold_records(records(LINES), publish_from=len(LINES))
    assert not batch.records and not batch.deletions and not batch.live
    assert f.fold.runs["run-0"].report_count == 6
    tail = f.fold_records(records([LINES[0]], start=len(LINES)), publish_from=len(LINES))
    assert tail.live and tail.duplicates == 1 and not tail.records  # already applied id: a no-op


def test_rejections_go_to_the_dead_letter_topic_only_when_live() -> None:
    bad = [Rec(0, b"{"), Rec(1, None), Rec(2, LINES[0], key=b"someone-else")]
    assert not folder().fold_records(bad, publish_from=3).records
    batch = folder().fold_records(bad, publish_from=0)
    assert [r.topic for r in batch.records] == ["dlq"] * 3
    assert [dict(r.headers)["__ckptlog.errors.reason"] for r in batch.records] == [
        b"invalid_json",
        b"invalid_envelope",
        b"key_mismatch",
    ]
    assert batch.rejected == 3 and batch.live


def test_a_result_for_an_unknown_run_is_a_warning_not_a_wedged_partition() -> None:
    """issue 20 #1: a validation_result naming no known run raised KeyError while the batch's records
    were built, so the partition was rebuilt until TooManyRebuilds, and the valid events around it
    were never committed. It is a `not_pending` warning (contract §3), and the batch goes on."""
    from tests import factories as fx

    lines = [fx.result("typo-run", "file:///r/typo-run/c0"), *LINES[:3]]
    batch = folder().fold_records(records(lines), publish_from=0)
    warnings = [json.loads(r.value or b"{}") for r in batch.records if r.topic == "ckpt" and r.key == b"typo-run"]
    assert [w["data"]["code"] for w in warnings] == ["not_pending"]
    assert batch.applied == 4 and batch.rejected == 0
    assert not any(r.topic == "state" and r.key == b"typo-run" for r in batch.records)  # no run, no view


def test_a_run_finished_and_retired_in_a_batch_publishes_its_final_view() -> None:
    """A run that owes nothing leaves the fold's hot state in its run_finished itself; its final VIEW,
    marked finished, is still published, and a later report in the same batch is dead-lettered."""
    from tests import factories as fx

    lines = [
        fx.started("x", "file:///r/x"),
        fx.report("x", {"acc": 1}, "file:///r/x/c0"),
        fx.finished("x"),
        fx.report("x", {"acc": 2}, "file:///r/x/c1"),
    ]
    f = folder()
    batch = f.fold_records(records(lines), publish_from=0)
    views = [json.loads(r.value or b"{}") for r in batch.records if r.topic == "state" and r.key == b"x"]
    assert len(views) == 1 and views[0]["finished"] is True and views[0]["committed"] == 1
    assert [dict(r.headers)["__ckptlog.errors.reason"] for r in batch.records if r.topic == "dlq"] == [b"run_finished"]
    assert "x" not in f.fold.runs and f.fold.finished == {"x": "file:///r/x"}


def test_a_paged_run_that_retires_leaves_nothing_in_the_pager() -> None:
    from tests import factories as fx

    lines = [fx.started("p", "file:///r/p"), *(fx.report("p", {}, f"file:///r/p/c{i}") for i in range(300))]
    f = folder()
    f.fold_records(records(lines), publish_from=0)
    assert "p" in f.pager._index  # published as pages: more than 256 kept
    batch = f.fold_records(records([fx.finished("p")], start=len(lines)), publish_from=0)
    heads = [json.loads(r.value or b"{}") for r in batch.records if r.topic == "state" and r.key == b"p"]
    assert heads[-1]["finished"] is True and heads[-1]["pages"] == {"span": 32}
    assert "p" not in f.pager._index and not [k for k in f.pager._parts if k[0] == "p"]


def test_a_forgotten_run_gets_tombstones_not_a_view() -> None:
    from tests import factories as fx

    lines = [fx.started("z", "file:///r/z"), fx.report("z", {}, "file:///r/z/c0"), fx.forgotten("z")]
    f = folder()
    batch = f.fold_records(records(lines), publish_from=0)
    state = [(r.key, r.value) for r in batch.records if r.topic == "state"]
    assert state == [(b"z", None)]  # the view of this batch's changes is never written: only its tombstone
    assert "z" not in f.fold.runs and f.fold.finished == {"z": "file:///r/z"}
    paged = [fx.started("q", "file:///r/q"), *(fx.report("q", {}, f"file:///r/q/c{i}") for i in range(300))]
    f.fold_records(records(paged, start=3), publish_from=0)
    batch = f.fold_records(records([fx.forgotten("q")], start=303), publish_from=0)
    keys = [r.key for r in batch.records if r.topic == "state"]
    assert keys[-1] == b"q" and len(keys) == 11 and all(r.value is None for r in batch.records if r.topic == "state")
    assert "q" not in f.pager._index


def stage_by_stage(f: BatchFolder, recs: list[Rec], publish_from: int) -> Batch:
    """`fold_records` as its docstring spells it: each stage method called on its own, then seal."""
    batch = Batch(consumed=len(recs), live=recs[-1].offset >= publish_from, end=recs[-1].offset + 1)
    for record in recs:
        live = record.offset >= publish_from
        event = f.decode(record)
        if isinstance(event, Rejection):
            f._reject(batch, record, event, "decode", live)
            continue
        effects = f.apply(batch, event)
        if effects.rejection is not None:
            f._reject(batch, record, effects.rejection, "fold", live)
        elif live and not effects.duplicate:
            f.emit(batch, record, event, effects)
    f.seal(batch)
    return batch


def comparable(batch: Batch) -> dict[str, object]:
    """The batch's fields, its runs by id (RunState compares by identity)."""
    fields = {name: getattr(batch, name) for name in Batch.__dataclass_fields__}
    fields["changed"], fields["forgotten"] = list(batch.changed), list(batch.forgotten)
    fields["marks"] = {run_id: (*mark[:3], mark[3] and mark[3].run_id) for run_id, mark in batch.marks.items()}
    return fields


def test_the_inlined_walk_equals_the_stages_called_one_by_one() -> None:
    """fold_records decodes and applies inline: records, counts and state match the stage methods'
    over reports with and without checkpoints, duplicates, rejections and records below publish_from."""
    lines = workload("file:///r", runs=3, reports=40, keep=2, validation_share=0.3)
    sparse = [
        json.dumps({**json.loads(line), "id": f"m-{i}", "data": {"metrics": {"loss": i}}}).encode()
        for i, line in enumerate(lines[3:20])
    ]
    recs = records(lines[:25] + sparse + lines[5:9] + lines[25:])
    recs[7] = Rec(7, None)
    recs[11] = Rec(11, b"{", b"run-0")
    total = Batch()
    for publish_from in (0, 30):
        inline, staged = folder(), folder()
        for start in range(0, len(recs), 16):
            got, want = (
                inline.fold_records(recs[start : start + 16], publish_from),
                stage_by_stage(staged, recs[start : start + 16], publish_from),
            )
            assert comparable(got) == comparable(want)
            total.merge(want)
        assert {k: run_view(r) for k, r in inline.fold.runs.items()} == {
            k: run_view(r) for k, r in staged.fold.runs.items()
        }
    assert total.applied and total.duplicates and total.rejected and total.dead and total.outputs
