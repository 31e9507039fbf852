"""One watermark per run per batch (contract §4, §5): the last change's values, that record's output id."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlog.kafka.records import OutRecord, PartitionId
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.outputs import DEFERRED_MARK
from ckptlog.processor.service.batch import Batch, BatchFolder
from ckptlog.processor.service.harness import workload
from ckptlog.processor.service.records import RecordFactory
from tests import factories as fx
from tests.unit.core.test_fold_properties import SETTINGS, logs
from tests.unit.service.test_batch import NAMES, folder, records

ONE_RUN = workload("file:///r", runs=1, reports=40, keep=2, validation_share=0.0)
TWO_RUNS = workload("file:///r", runs=2, reports=30, keep=3, validation_share=0.3)


def bodies(batch: Batch, topic: str) -> list[dict[str, Any]]:
    return [json.loads(r.value or b"") for r in batch.records if r.topic == topic]


def per_event(lines: list[bytes]) -> list[OutRecord]:
    """Every record a fold makes with one input record per batch (what a processor published per event)."""
    f, out = folder(), []
    for record in records(lines):
        out += f.fold_records([record], publish_from=0).records
    return out


def test_a_batch_of_reports_to_one_run_publishes_one_watermark_with_the_final_values() -> None:
    f = folder()
    batch = f.fold_records(records(ONE_RUN), publish_from=0)
    (mark,) = bodies(batch, "wm")  # one, not one per report (the processor before issue 25: 41)
    run = f.fold.runs["run-0"]
    assert mark["data"] == {
        "committed": run.report_count,
        "validated": run.validated,
        "generation": run.generation,
        "index_in_generation": run.index_in_generation,
    }
    assert run.report_count == len(ONE_RUN) - 1  # every line but the run_started is a report
    last = len(ONE_RUN) - 1
    assert mark["id"].startswith(f"ckptlog:in:0:{last}:")  # named by the batch's last record that changed the run
    (view,) = bodies(batch, "state")
    assert (view["committed"], view["validated"]) == (mark["data"]["committed"], mark["data"]["validated"])


def test_per_checkpoint_outputs_stay_one_per_fact() -> None:
    batch = folder().fold_records(records(ONE_RUN), publish_from=0)
    types = [body["type"] for body in bodies(batch, "ckpt")]
    reports = len(ONE_RUN) - 1
    assert types.count("ckptlog.checkpoint_registered.v1") == reports
    assert types.count("ckptlog.checkpoint_evicted.v2") == len(batch.deletions) > reports // 2  # keep=2
    assert batch.outputs["watermark"] == 1 and batch.outputs["checkpoint_registered"] == reports


def test_each_run_of_a_batch_gets_its_own_last_watermark() -> None:
    batch = folder().fold_records(records(TWO_RUNS), publish_from=0)
    marks = bodies(batch, "wm")
    assert sorted(m["subject"] for m in marks) == ["run-0", "run-1"]
    for mark in marks:
        offsets = [i for i, line in enumerate(TWO_RUNS) if json.loads(line)["subject"] == mark["subject"]]
        assert int(mark["id"].split(":")[3]) == offsets[-1]


def test_a_coalesced_watermark_is_the_per_event_one_of_its_record_byte_for_byte() -> None:
    """Whatever the batching, an id names one watermark: readers deduplicating on ids, or keeping the
    highest watermark, read a replay with other batch boundaries as they read the first run."""
    single = {json.loads(r.value or b"")["id"]: r for r in per_event(TWO_RUNS) if r.topic == "wm"}
    for size in (1, 7, 13, len(TWO_RUNS)):
        f = folder()
        lines = records(TWO_RUNS)
        for start in range(0, len(lines), size):
            for record in f.fold_records(lines[start : start + size], publish_from=0).records:
                if record.topic == "wm":
                    assert record == single[json.loads(record.value or b"")["id"]]


def test_a_replay_of_the_same_batches_publishes_the_same_records() -> None:
    def run() -> list[OutRecord]:
        f, out, lines = folder(), [], records(TWO_RUNS)
        for start in range(0, len(lines), 9):
            out += f.fold_records(lines[start : start + 9], publish_from=0).records
        return out

    assert run() == run()


def test_only_live_records_make_the_watermark() -> None:
    """A batch split at publish_from (an earlier owner published the first part): the watermark is
    the live part's last, never one the earlier owner already published."""
    f = folder()
    lines = records(ONE_RUN)
    assert not f.fold_records(lines[:10], publish_from=10).records
    (mark,) = bodies(f.fold_records(lines[10:], publish_from=10), "wm")
    assert mark["id"].startswith(f"ckptlog:in:0:{len(ONE_RUN) - 1}:")


def _event(n: int, kind: str, run: str, data: dict[str, Any]) -> bytes:
    body = {"specversion": "1.0", "id": f"e{n}", "source": "t", "type": f"ckptlog.{kind}.v1", "subject": run}
    return json.dumps({**body, "data": data}).encode()


def test_the_fold_makes_at_most_one_watermark_per_event_and_puts_it_last() -> None:
    """What the batch folder relies on to coalesce without scanning every event's outputs."""
    from ckptlog.events.codec import decode_event
    from ckptlog.processor.core.state import FoldSettings

    extra = [
        _event(1, "worker_group_restart", "run-0", {"num_workers": 2}),
        _event(2, "report", "run-1", {"metrics": {}, "checkpoint": None, "generation": 3}),
        _event(3, "worker_group_restart", "run-1", {"num_workers": 2, "generation": 1}),
        _event(4, "run_finished", "run-0", {"keep": "best"}),
        _event(5, "run_finished", "run-9", {}),
        _event(6, "report", "run-7", {"metrics": {}}),
    ]
    fold, seen = Fold(FoldSettings()), 0
    for line in [*TWO_RUNS, *extra]:
        event = decode_event(line, None)
        assert not isinstance(event, Exception) and hasattr(event, "subject"), event
        names = [name for name, _ in fold.apply(event).outputs]  # type: ignore[arg-type]
        assert "watermark" not in names[:-1], names
        seen += names[-1:] == ["watermark"]
    assert seen == len(TWO_RUNS) + 4  # every event but the two warnings made one


@st.composite
def lifecycle_logs(draw: Any) -> list[bytes]:
    """test_fold_properties' logs with finishes (both keeps), forgets, reopens and generation reports
    inserted: events that change a run's watermark fields without being a plain report or a result."""
    out = draw(logs())
    for n in range(draw(st.integers(0, 6))):
        run = draw(st.sampled_from(["a", "b"]))
        extra = draw(
            st.sampled_from(
                [
                    fx.finished(run, event_id=f"fin-{n}"),
                    fx.finished(run, "best", event_id=f"best-{n}"),
                    fx.forgotten(run, event_id=f"forget-{n}"),
                    fx.reopened(run, event_id=f"reopen-{n}"),
                    fx.report(run, {"loss": 1}, generation=n + 2, event_id=f"gen-{n}"),
                ]
            )
        )
        out.insert(draw(st.integers(0, len(out))), extra)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=lifecycle_logs(), size=st.integers(1, 12))
def test_deferred_watermarks_equal_the_ones_each_event_built(lines: list[bytes], size: int) -> None:
    """The batch folder defers a report's and a result's watermark to `seal` (core/outputs.py
    DEFERRED_MARK), built from the run then: every record, byte for byte, is the one a fold building
    each event's watermark gives, over any log and any batching (the invariant: every change of a
    watermark's fields emits one in the same event)."""
    outputs = []
    for defer in (True, False):
        f = BatchFolder(Fold(SETTINGS), RecordFactory(NAMES, PartitionId("in", 0)))
        f.fold.defer_marks = defer
        recs, out = records(lines), []
        for start in range(0, len(recs), size):
            out += f.fold_records(recs[start : start + size], publish_from=0).records
        outputs.append(out)
    assert outputs[0] == outputs[1]


def test_the_batch_folder_defers_a_reports_watermark_and_seal_builds_it() -> None:
    """What the property above compares: the folder's fold puts the placeholder in a report's outputs."""
    f = folder()
    recs = records(ONE_RUN)
    f.fold_records(recs[:1], publish_from=0)
    effects = f.fold.apply(fx.event(ONE_RUN[1]))
    assert f.fold.defer_marks and effects.outputs[-1] is DEFERRED_MARK
