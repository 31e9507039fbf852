"""Bounded views (contract §7): what a reader assembles from the state topic is always the fold's VIEW,
no record is larger than the budget, and a change costs the pages it touched, not the run."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from ckptlog.events.view import RunView, assemble, parse_page_key
from ckptlog.kafka.records import InputRecord, OutRecord, PartitionId
from ckptlog.processor.core import Fold, FoldSettings, run_view
from ckptlog.processor.service.batch import BatchFolder
from ckptlog.processor.service.pages import ViewPager
from ckptlog.processor.service.records import RecordFactory, TopicNames
from tests import factories as f
from tests.unit.service.test_batch import Rec

NAMES = TopicNames("in", "c", "v", "w", "state", "d")
ROOT = "file:///data"


class StateTopic:
    """A compacted topic as a reader sees it: the latest value per key, in the order written."""

    def __init__(self) -> None:
        self.table: dict[bytes, bytes] = {}
        self.written: list[OutRecord] = []

    def apply(self, records: list[OutRecord]) -> None:
        for record in records:
            if record.topic != "state":
                continue
            self.written.append(record)
            assert record.key is not None
            if record.value is None:
                self.table.pop(record.key, None)
            else:
                self.table[record.key] = record.value

    def view(self, run_id: str) -> dict[str, Any]:
        parts = {}
        for key, value in self.table.items():
            page = parse_page_key(key.decode())
            if page is not None and page[0] == run_id:
                parts[page[1:]] = json.loads(value)
        return assemble(json.loads(self.table[run_id.encode()]), parts)


def stream(rng: random.Random, reports: int, keep: int | None) -> list[bytes]:
    """Reports with scores (some missing), validations and their results, over two runs."""
    lines = [f.started(run, f"{ROOT}/{run}", keep=keep, attr="acc") for run in ("a", "b")]
    pending: list[tuple[str, str]] = []
    for i in range(reports):
        run = rng.choice(["a", "a", "b"])
        metrics = {"acc": rng.random()} if rng.random() < 0.9 else {}
        validate = rng.random() < 0.1
        lines.append(f.report(run, metrics, f"{ROOT}/{run}/c{i}", validation=validate))
        if validate:
            pending.append((run, f"{ROOT}/{run}/c{i}"))
        if pending and rng.random() < 0.1:
            run, path = pending.pop(rng.randrange(len(pending)))
            lines.append(f.result(run, path, rng.choice(["VALIDATED", "VALIDATION_FAILED"]), {"acc": rng.random()}))
    return lines


def records(lines: list[bytes], start: int) -> list[InputRecord]:
    return [Rec(start + i, line, json.loads(line)["subject"].encode()) for i, line in enumerate(lines)]  # type: ignore[misc]


@pytest.mark.parametrize("keep", [None, 40])
@pytest.mark.parametrize("budget", [512 * 1024, 600])
def test_what_a_reader_assembles_is_the_folds_view_after_every_batch(keep: int | None, budget: int) -> None:
    rng = random.Random(5)
    lines = stream(rng, 1500, keep)
    fold = Fold(FoldSettings())
    folder = BatchFolder(fold, RecordFactory(NAMES, PartitionId("in", 0)))
    folder.pager = ViewPager("state", span=8, paged_from=20, budget=budget)
    topic, at = StateTopic(), 0
    while at < len(lines):
        size = rng.choice([1, 3, 17, 120])
        batch = folder.fold_records(records(lines[at : at + size], at), 0)
        at += size
        topic.apply(batch.records)
        for run_id in ("a", "b"):
            if run_id.encode() in topic.table:
                assert topic.view(run_id) == run_view(fold.runs[run_id]), f"after offset {at}"
    assert any(parse_page_key(r.key.decode()) for r in topic.written if r.key), "the runs were paged"
    limit = max(budget, 600) + 1024  # an entry larger than the budget sits alone in its part
    assert all(len(r.value or b"") <= limit for r in topic.written)
    RunView.model_validate(topic.view("a"))


def test_a_change_to_a_large_run_writes_the_pages_it_touched_not_the_run() -> None:
    fold = Fold(FoldSettings())
    folder = BatchFolder(fold, RecordFactory(NAMES, PartitionId("in", 0)))
    lines = [f.started("a", f"{ROOT}/a", attr="acc")] + [
        f.report("a", {"acc": i % 13}, f"{ROOT}/a/c{i}") for i in range(3000)
    ]
    folder.fold_records(records(lines, 0), 0)
    one = folder.fold_records(records([f.report("a", {"acc": 5}, f"{ROOT}/a/new")], len(lines)), 0)
    state = [r for r in one.records if r.topic == "state"]
    assert len(state) == 2  # the last page and the head
    assert sum(len(r.value or b"") for r in state) < 10_000  # not the ~300 KB of the whole view
    head = json.loads(state[-1].value or b"{}")
    assert head["checkpoints"] == [] and head["pages"] == {"span": 32} and head["best"] is not None


def test_a_small_runs_view_is_one_record_as_before() -> None:
    fold = Fold(FoldSettings())
    folder = BatchFolder(fold, RecordFactory(NAMES, PartitionId("in", 0)))
    lines = [f.started("a", f"{ROOT}/a", attr="acc", keep=3)] + [
        f.report("a", {"acc": i}, f"{ROOT}/a/c{i}") for i in range(10)
    ]
    batch = folder.fold_records(records(lines, 0), 0)
    (state,) = [r for r in batch.records if r.topic == "state"]
    assert state.key == b"a" and json.loads(state.value or b"") == run_view(fold.runs["a"])


async def test_a_reader_follows_a_paged_run_record_by_record() -> None:
    """ckptlog.AsyncReader's table, fed the state topic's records one at a time as they were written,
    shows each head's assembled VIEW (never a head with pages it has not read yet)."""
    from ckptlog.client.view_table import ViewTable
    from ckptlog.kafka.reader import Record

    rng = random.Random(9)
    lines = stream(rng, 800, None)
    fold = Fold(FoldSettings())
    folder = BatchFolder(fold, RecordFactory(NAMES, PartitionId("in", 0)))
    folder.pager = ViewPager("state", span=8, paged_from=20, budget=2000)
    table, at = ViewTable(), 0
    while at < len(lines):
        batch = folder.fold_records(records(lines[at : at + 50], at), 0)
        at += 50
        for offset, r in enumerate(r for r in batch.records if r.topic == "state"):
            await table.apply([Record("state", 0, offset, r.key, r.value, ())])
        assert table.views["a"].model_dump() == RunView.model_validate(run_view(fold.runs["a"])).model_dump()
    result = await table.wait_for("a", fold.runs["a"].report_count, "committed", timeout_s=1)
    assert result.reached and len(result.checkpoints) == len(fold.runs["a"].checkpoints) > 20
