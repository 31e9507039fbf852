"""Each stage of a batch on its own (issue 40 item 4), no broker: decode, apply, emit and seal
(`BatchFolder`, batch.py), claim, commit and after-commit (`Pipeline`, pipeline.py). The walks that chain
them are test_batch.py's (`fold_records`) and test_commit.py's (`submit`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckptlog.errors import BrokerError
from ckptlog.events.dead_letters import H_REASON, H_STAGE
from ckptlog.events.decoded import Report, RunStarted
from ckptlog.events.rejections import Reason, Rejection
from ckptlog.events.state import H_INPUT_OFFSET
from ckptlog.kafka.records import OutRecord, PartitionId
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.outputs import Deletion, Effects
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.service.batch import Batch, BatchFolder
from ckptlog.processor.service.partition import PartitionTask, TaskParts, new_task
from ckptlog.processor.service.pipeline import Pipeline
from ckptlog.processor.service.records import RecordFactory, TopicNames
from ckptlog.processor.service.restore import Restored
from ckptlog.processor.service.snapshotting import SnapshotScheduler
from ckptlog.processor.storage.snapshots import SnapshotStore
from tests import factories as fx
from tests.unit.service.test_batch import Rec, records
from tests.unit.service.test_partition import Deleter, Publisher

PID = PartitionId("in", 0)
NAMES = TopicNames("in", "ckpt", "val", "wm", "state", "dlq")
ROOT = "file:///r/a"


def folder(**settings: Any) -> BatchFolder:
    return BatchFolder(Fold(FoldSettings(**settings)), RecordFactory(NAMES, PID))


def applied(f: BatchFolder, batch: Batch, line: bytes, offset: int) -> tuple[Rec, Any, Effects]:
    """A record decoded and applied: what emit is given."""
    (record,) = records([line], start=offset)
    event = f.decode(record)
    assert not isinstance(event, Rejection)
    return record, event, f.apply(batch, event)


# -- decode -----------------------------------------------------------------------------------------


def test_decode_gives_the_struct_of_the_kind_and_touches_no_state() -> None:
    f = folder()
    (started, report) = records([fx.started("a", ROOT), fx.report("a", {"acc": 1}, f"{ROOT}/c0")])
    assert isinstance(f.decode(started), RunStarted)
    event = f.decode(report)
    assert isinstance(event, Report) and event.subject == "a" and event.data.metrics == {"acc": 1}
    assert not f.fold.runs


def test_decode_refuses_a_tombstone_a_foreign_key_and_what_the_fold_settings_bound() -> None:
    line = fx.report("a", {"acc": 1}, f"{ROOT}/c0")
    assert f"{len(line)}"  # the bound below is the record's own size
    cases = [
        (folder(), Rec(0, None, b"a"), Reason.INVALID_ENVELOPE),
        (folder(), Rec(0, line, b"b"), Reason.KEY_MISMATCH),
        (folder(max_payload_bytes=len(line) - 1), Rec(0, line, b"a"), Reason.PAYLOAD_TOO_LARGE),
        (folder(max_depth=1), Rec(0, line, b"a"), Reason.TOO_DEEP),
    ]
    for f, record, reason in cases:
        rejection = f.decode(record)
        assert isinstance(rejection, Rejection) and rejection.reason == reason, (reason, rejection)
        assert rejection.message


# -- apply ------------------------------------------------------------------------------------------


def test_apply_folds_the_event_and_counts_it_as_applied_or_duplicate() -> None:
    f, batch = folder(), Batch()
    applied(f, batch, fx.started("a", ROOT), 0)
    line = fx.report("a", {"acc": 1}, f"{ROOT}/c0")
    _, _, first = applied(f, batch, line, 1)
    assert [name for name, _ in first.outputs] == ["checkpoint_registered", "watermark"]
    assert f.fold.runs["a"].report_count == 1 and batch.applied == 2 and batch.kinds == {RunStarted: 1, Report: 1}
    _, _, again = applied(f, batch, line, 2)  # the same id
    assert again.duplicate and not again.outputs and f.fold.runs["a"].report_count == 1
    assert batch.applied == 2 and batch.duplicates == 1 and batch.kinds == {RunStarted: 1, Report: 2}
    assert not batch.records  # apply emits nothing


def test_apply_leaves_a_rejection_to_the_caller_and_the_state_as_it_was() -> None:
    f, batch = folder(), Batch()
    applied(f, batch, fx.started("a", ROOT), 0)
    _, _, effects = applied(f, batch, fx.report("a", {}, "file:///elsewhere/c0"), 1)
    assert effects.rejection is not None and effects.rejection.reason == Reason.PATH_OUTSIDE_ROOT
    assert batch.applied == 1 and batch.rejected == 0 and not batch.records  # counted and dead-lettered by the walk
    assert f.fold.runs["a"].report_count == 0


# -- emit and seal ----------------------------------------------------------------------------------


def test_emit_makes_records_naming_the_input_and_holds_the_watermark_for_seal() -> None:
    f, batch = folder(), Batch(live=True, end=3)
    for offset, line in enumerate(
        [fx.started("a", ROOT, keep=1), *(fx.report("a", {}, f"{ROOT}/c{i}") for i in (0, 1))]
    ):
        f.emit(batch, *applied(f, batch, line, offset))
    ids = [json.loads(r.value or b"")["id"] for r in batch.records]
    types = [json.loads(r.value or b"")["type"] for r in batch.records]
    assert types == ["ckptlog.checkpoint_registered.v1"] * 2 + ["ckptlog.checkpoint_evicted.v2"]  # no watermark yet
    assert [r.topic for r in batch.records] == ["ckpt"] * 3
    assert ids[-1].startswith("ckptlog:in:0:2:")  # the output id names the input record
    assert list(batch.marks) == ["a"] and batch.marks["a"][0] == 2  # the run's last change, for seal
    assert list(batch.changed) == ["a"] and [d.path for d in batch.deletions] == [f"{ROOT}/c0"]
    assert batch.outputs["checkpoint_evicted"] == 1 and "watermark" not in batch.outputs
    assert not [r for r in batch.records if r.topic in ("wm", "state")]


def test_seal_adds_one_watermark_per_run_then_each_changed_runs_view_and_claims_only_when_live() -> None:
    for live in (True, False):
        f, batch = folder(), Batch(live=live, end=4)
        lines = [fx.started("a", ROOT), fx.started("b", "file:///r/b"), fx.report("a", {}, f"{ROOT}/c0")]
        for offset, line in enumerate(lines):
            f.emit(batch, *applied(f, batch, line, offset))
        before = len(batch.records)
        f.seal(batch)
        sealed = batch.records[before:]
        assert [(r.topic, r.key) for r in sealed] == [("wm", b"a"), ("wm", b"b"), ("state", b"a"), ("state", b"b")]
        assert batch.views == 2 and batch.outputs["watermark"] == 2
        assert dict(sealed[-1].headers)[H_INPUT_OFFSET] == b"3"  # the batch's last input offset
        assert sorted(batch.claims) == ([(ROOT, "a"), ("file:///r/b", "b")] if live else [])
        assert not f.fold.roots.fresh  # claimed or not, each root is handed over once


def test_emit_undoes_an_event_whose_records_cannot_be_built(monkeypatch: pytest.MonkeyPatch) -> None:
    f, batch = folder(), Batch(live=True, end=2)
    f.emit(batch, *applied(f, batch, fx.started("a", ROOT), 0))
    record, event, effects = applied(f, batch, fx.report("a", {"acc": 1}, f"{ROOT}/c0"), 1)

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("cannot encode")

    monkeypatch.setattr(f.factory, "outputs", broken)
    kept = len(batch.records)
    f.emit(batch, record, event, effects)
    assert f.fold.runs["a"].report_count == 0 and not f.fold.runs["a"].checkpoints  # rolled back
    assert batch.applied == 1 and batch.rejected == 1 and batch.dead == {"internal_error": 1}
    (letter,) = batch.records[kept:]
    assert letter.topic == "dlq" and letter.value == record.value
    assert dict(letter.headers)["__ckptlog.errors.reason"] == b"internal_error"


def emitted(f: BatchFolder, lines: list[bytes]) -> Batch:
    """`lines` decoded, applied and emitted one by one (live), not sealed."""
    batch = Batch(live=True, end=len(lines))
    for offset, line in enumerate(lines):
        record, event, effects = applied(f, batch, line, offset)
        assert effects.rejection is None, effects.rejection
        f.emit(batch, record, event, effects)
    return batch


def test_emit_collects_the_roots_of_runs_retired_or_reopened_the_last_change_of_a_run_counting() -> None:
    f = folder()
    lines = [fx.started("a", ROOT), fx.finished("a"), fx.started("b", "file:///r/b"), fx.finished("b")]
    batch = emitted(f, [*lines, fx.reopened("a")])
    assert batch.retired == [("file:///r/b", "b")] and batch.reopened == [(ROOT, "a")]  # a's retirement undone
    again = emitted(f, [fx.finished("a", event_id="again")])  # reopened then retired in one batch: retired
    assert again.retired == [(ROOT, "a")] and not again.reopened
    both = Batch()
    both.merge(batch)
    both.merge(again)
    assert both.reopened == [(ROOT, "a")] and both.retired == [("file:///r/b", "b"), (ROOT, "a")]


def test_emit_notes_each_runs_first_run_started_and_tombstones_a_forgotten_or_refused_run() -> None:
    f = folder()
    batch = emitted(
        f,
        [
            fx.started("a", ROOT, event_id="first"),
            fx.started("a", ROOT, event_id="second"),  # a second run_started of the run: the first is noted
            fx.started("b", "file:///r/b"),
            fx.started("c", "file:///r/c"),
            fx.forgotten("b"),
            fx.root_refused("c", "file:///r/c"),
        ],
    )
    assert {run: record.offset for run, record in batch.started.items()} == {"a": 0, "b": 2, "c": 3}
    assert list(batch.changed) == ["a"] and sorted(batch.forgotten) == ["b", "c"]
    assert "c" in f.fold.symlinked  # refused for a link: it gets no retired claim, the forgotten run does
    assert batch.retired == [("file:///r/b", "b")]


# -- claim ------------------------------------------------------------------------------------------


@pytest.fixture
def bound(tmp_path: Path) -> Path:
    """A --storage-root holding a real directory and a link to a directory outside it."""
    (tmp_path / "bound/real").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "bound/l").symlink_to(tmp_path / "outside", target_is_directory=True)
    return tmp_path / "bound"


async def test_claim_looks_for_a_link_then_claims_the_new_roots_and_bars_the_retired_ones(bound: Path) -> None:
    linked, real, done = f"file://{bound}/l/r", f"file://{bound}/real/s", f"file://{bound}/real/t"
    settings = FoldSettings(default_root=str(bound), outer_root=str(bound))
    _, pipe, publisher, deleter, _ = pipeline(bound.parent / "t", fold=Fold(settings))
    lines = [fx.started("r", linked), fx.started("s", real), fx.started("t", done), fx.finished("t")]
    deleter.calls.clear()  # the catch-up's
    batch = pipe.fold_records(records(lines), 0)
    sealed = len(batch.records)
    await pipe.claim(batch)
    fact, letter = batch.records[sealed:]  # the fact and the run_started's dead letter, after the sealed records
    assert (fact.topic, fact.key, json.loads(fact.value or b"")["type"]) == ("in", b"r", "ckptlog.root_refused.v1")
    assert letter.topic == "dlq" and letter.value == lines[0]
    assert (dict(letter.headers)[H_REASON], dict(letter.headers)[H_STAGE]) == (b"root_behind_symlink", b"storage")
    assert batch.dead == {"root_behind_symlink": 1} and batch.reasons == {("root_behind_symlink", "storage"): 1}
    assert sorted(deleter.claimed) == [(linked, "r"), (real, "s"), (done, "t")]  # r's too: the walk refuses it
    assert deleter.retired == [(done, "t")] and deleter.calls == [("claimed", None), ("retired", 3)]
    assert not publisher.commits and not list((bound.parent / "outside").iterdir())  # nothing committed or written


async def test_claim_looks_at_nothing_a_replay_registered(bound: Path) -> None:
    settings = FoldSettings(default_root=str(bound), outer_root=str(bound))
    _, pipe, _, deleter, _ = pipeline(bound.parent / "t", fold=Fold(settings))
    deleter.calls.clear()  # the catch-up's
    batch = pipe.fold_records(records([fx.started("r", f"file://{bound}/l/r")]), 1)  # below publish_from
    await pipe.claim(batch)
    assert not batch.records and not deleter.calls  # its claim waits for the catch-up; the log has its fact


# -- commit and after-commit ------------------------------------------------------------------------


def pipeline(
    tmp_path: Path, every: int = 10_000, fold: Fold | None = None
) -> tuple[PartitionTask, Pipeline, Publisher, Deleter, SnapshotStore]:
    fold, store = fold or Fold(FoldSettings()), SnapshotStore(str(tmp_path / "snaps"), PID.topic, PID.partition)
    publisher, deleter = Publisher(), Deleter()
    parts = TaskParts(publisher, RecordFactory(NAMES, PID), SnapshotScheduler(PID, store, every, 3600, None), deleter)
    task = new_task(PID, Restored(fold, 0, 0, None), parts)
    task.catch_up()
    return task, task.pipeline, publisher, deleter, store


def out(n: int) -> list[OutRecord]:
    return [OutRecord("ckpt", b"a", b"{}") for _ in range(n)]


async def test_commit_makes_the_records_and_the_offset_durable_in_one_call(tmp_path: Path) -> None:
    _, pipe, publisher, _, _ = pipeline(tmp_path)
    assert await pipe.commit(Batch(records=out(2), live=True, end=7, consumed=7))
    assert publisher.commits == [(out(2), {PID: 7})] and pipe.next_offset == 7
    assert await pipe.commit(Batch(records=out(1), live=False, end=9))  # below publish_from: no offset to commit
    assert publisher.commits[-1] == (out(1), {}) and pipe.next_offset == 9
    assert pipe.stats.published == 3


async def test_a_failed_commit_breaks_the_partition_and_moves_nothing(tmp_path: Path) -> None:
    task, pipe, publisher, deleter, _ = pipeline(tmp_path)
    publisher.fail = True
    batch = Batch(records=out(1), live=True, end=5, deletions=[Deletion("a", f"{ROOT}/c0", ROOT, 1)])
    assert not await pipe.commit(batch)
    assert isinstance(task.life.broken, BrokerError) and pipe.next_offset == 0 and not pipe.usable
    assert not deleter.submitted  # after_commit is not reached by the walk


async def test_after_commit_hands_the_evictions_over_by_run_and_takes_a_due_snapshot(tmp_path: Path) -> None:
    _, pipe, _, deleter, store = pipeline(tmp_path, every=3)
    evicted = [Deletion(run, f"file:///r/{run}/c{i}", f"file:///r/{run}", i) for i, run in enumerate("bab")]
    batch = Batch(deletions=evicted, consumed=3, live=True, end=3)
    assert await pipe.commit(batch)
    pipe.folded_offset = 3  # as if the walk folded it
    await pipe.after_commit(batch)
    assert [run for run, _, _ in deleter.submitted] == ["a", "b", "b"]  # grouped by run, in order within one
    assert pipe.stats.consumed == 3 and pipe.stats.batches == 1
    await pipe.snapshots.wait()
    assert store.list_offsets() == [3]  # due (every 3 events) and the fold equals the committed state


async def test_after_commit_removes_the_reopened_runs_retired_claims_as_of_the_batch_then_evicts(
    tmp_path: Path,
) -> None:
    _, pipe, _, deleter, _ = pipeline(tmp_path)
    deleter.calls.clear()  # the catch-up's
    evicted = [Deletion("a", f"{ROOT}/c0", ROOT, 1)]
    batch = Batch(reopened=[(ROOT, "a")], deletions=evicted, consumed=5, live=True, end=5)
    assert await pipe.commit(batch)
    assert not deleter.reopened  # not before the reopen is durable
    await pipe.after_commit(batch)
    assert deleter.reopened == [(ROOT, "a")] and deleter.calls == [("reopened", 4), ("submitted", None)]


async def test_after_commit_takes_no_snapshot_while_a_folded_batch_awaits_its_commit(tmp_path: Path) -> None:
    _, pipe, _, _, store = pipeline(tmp_path, every=1)
    batch = Batch(consumed=3, live=True, end=3)
    assert await pipe.commit(batch)
    pipe.folded_offset = 6  # the next batch is folded already
    await pipe.after_commit(batch)
    await pipe.snapshots.wait()
    assert store.list_offsets() == []
