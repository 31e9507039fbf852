"""Issue 20 item 3: a paged run's VIEW after a partition changes hands. The new owner's pager starts
with an empty index, so page records the previous owner wrote for pages that are empty now were
never tombstoned, and readers merged them: `ckptlog inspect` and the AsyncReader showed 400 kept where
the fold keeps 300. Now the first paged write of a run in a pager tombstones every empty page
below its last one, whatever an earlier owner left (ckptlog/processor/service/pages.py)."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest

from ckptlog.events.state import H_INPUT_OFFSET, input_offset
from ckptlog.events.view import assemble, parse_page_key
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.core import Fold, FoldSettings, run_view
from ckptlog.processor.service.batch import BatchFolder
from ckptlog.processor.service.pages import ViewPager
from ckptlog.processor.service.records import RecordFactory
from ckptlog.processor.service.settings import ServiceSettings
from tests import factories as f
from tests.unit.service.fakes import FakeKafka
from tests.unit.service.test_pages import NAMES, ROOT, StateTopic, records, stream
from tests.unit.service.test_processor import produce, settings, started

RUN = "big"
BIG_ROOT = "file:///nowhere/big"


def make_folder(fold: Fold, pager: ViewPager | None = None) -> BatchFolder:
    folder = BatchFolder(fold, RecordFactory(NAMES, PartitionId("in", 0)))
    if pager is not None:
        folder.pager = pager
    return folder


def restored(lines: list[bytes], pager: ViewPager) -> BatchFolder:
    """What a restore hands the next task: the fold of `lines` (outputs published by an earlier owner,
    so folded without publishing) and a pager with no index."""
    folder = make_folder(Fold(FoldSettings()), pager)
    folder.fold_records(records(lines, 0), publish_from=len(lines))
    return folder


@pytest.mark.parametrize("seed", range(6))
def test_the_assembled_view_is_the_folds_whoever_wrote_the_pages_before(seed: int) -> None:
    """Pagers take turns on one state topic, each after a restore: every view read back is the fold's,
    among them runs that a new owner finds small (one plain record) and that grow paged again."""
    rng = random.Random(seed)
    lines = stream(rng, 900, rng.choice([None, 25, 40]))
    topic, at, turns = StateTopic(), 0, 0
    folder = make_folder(Fold(FoldSettings()), ViewPager("state", span=8, paged_from=20, budget=900))
    while at < len(lines):
        if rng.random() < 0.2:  # the partition moves: a new task restores the state, its pager empty
            folder, turns = restored(lines[:at], ViewPager("state", span=8, paged_from=20, budget=900)), turns + 1
        size = rng.choice([1, 5, 30, 120])
        batch = folder.fold_records(records(lines[at : at + size], at), 0)
        at += size
        topic.apply(batch.records)
        for run_id in ("a", "b"):
            if run_id.encode() in topic.table:
                assert topic.view(run_id) == run_view(folder.fold.runs[run_id]), f"after offset {at}, turn {turns}"
    assert turns >= 2


def test_a_restored_pager_tombstones_the_pages_the_first_batch_emptied() -> None:
    """The issue's shape on the pager: 400 kept (pending), paged; after a restore one batch of results
    evicts the 100 oldest, emptying pages 0-2, which the new pager never indexed."""
    lines = [f.started(RUN, f"{ROOT}/{RUN}", keep=300, attr="acc")]
    lines += [f.report(RUN, {"acc": i}, f"{ROOT}/{RUN}/c{i}", validation=True) for i in range(400)]
    topic = StateTopic()
    first = make_folder(Fold(FoldSettings()))
    topic.apply(first.fold_records(records(lines, 0), 0).records)
    assert len(topic.view(RUN)["checkpoints"]) == 400
    results = [f.result(RUN, f"{ROOT}/{RUN}/c{i}", "VALIDATED", {"acc": -1}) for i in range(100)]
    second = restored(lines, ViewPager("state"))
    batch = second.fold_records(records(results, len(lines)), 0)
    topic.apply(batch.records)
    assert topic.view(RUN) == run_view(second.fold.runs[RUN]) and len(topic.view(RUN)["checkpoints"]) == 300
    tombstones = [r for r in batch.records if r.topic == "state" and r.value is None]
    assert [parse_page_key((r.key or b"").decode()) for r in tombstones] == [(RUN, p, 0) for p in range(3)]


def test_the_cost_of_a_takeover_is_one_tombstone_per_empty_page() -> None:
    """Measured for docs/processor.md: a keep-300 run of N reports, its first batch after a restore."""
    for n in (1_000, 10_000):
        lines = [f.started(RUN, f"{ROOT}/{RUN}", keep=300)] + [
            f.report(RUN, {}, f"{ROOT}/{RUN}/c{i}") for i in range(n)
        ]
        folder = restored(lines, ViewPager("state"))
        batch = folder.fold_records(records([f.report(RUN, {}, f"{ROOT}/{RUN}/x")], len(lines)), 0)
        state = [r for r in batch.records if r.topic == "state"]
        tombstones = [r for r in state if r.value is None]
        kept_pages = {i // 32 for i in range(n + 1 - 300, n + 1)}  # keep 300: the newest reports
        assert len(tombstones) == -(-(n + 1) // 32) - len(kept_pages) == {1_000: 21, 10_000: 303}[n]
        assert sum(len(r.key or b"") for r in tombstones) < 20 * len(tombstones)


def test_every_state_record_names_the_input_offset_of_its_batch() -> None:
    lines = [f.started("a", f"{ROOT}/a", attr="acc")] + [
        f.report("a", {"acc": i}, f"{ROOT}/a/c{i}") for i in range(300)
    ]
    batch = make_folder(Fold(FoldSettings())).fold_records(records(lines, 40), 0)
    state = [r for r in batch.records if r.topic == "state"]
    assert len(state) > 10 and all(input_offset(r.headers) == 40 + len(lines) - 1 for r in state)
    assert all(dict(r.headers)[H_INPUT_OFFSET] == b"340" for r in state)


def _assembled(kafka: FakeKafka) -> dict[str, Any]:
    heads: dict[str, Any] = {}
    parts: dict[str, dict[tuple[int, int], Any]] = {}
    for log in kafka.logs["ckptlog.state"]:
        for record in log:
            key = (record.key or b"").decode()
            page = parse_page_key(key)
            table = parts.setdefault(page[0], {}) if page is not None else heads
            slot: Any = page[1:] if page is not None else key
            if record.value is None:
                table.pop(slot, None)
            else:
                table[slot] = json.loads(record.value)
    return {run: assemble(head, parts.get(run, {})) for run, head in sorted(heads.items())}


async def test_a_second_processor_taking_over_after_a_restore_publishes_the_folds_view(tmp_path: Path) -> None:
    """The issue's repro on the processor with the in-memory broker: the first instance pages a run of
    400 kept checkpoints (all pending) and stops; the second restores the partition from the snapshot,
    and its first batch evicts the 100 oldest. Its view must be the fold's 300."""
    kafka = FakeKafka()
    config: ServiceSettings = settings(tmp_path).model_copy(update={"max_batch_records": 500})
    lines = [f.started(RUN, BIG_ROOT, keep=300, attr="acc")]
    lines += [f.report(RUN, {"acc": i}, f"{BIG_ROOT}/c{i}", validation=True) for i in range(400)]
    lines += [f.report("other", {"acc": 1}, "file:///nowhere/other/c0")]  # the other partition (settled needs one)
    produce(kafka, lines)
    first, run = await started(config, kafka)
    assert len(_assembled(kafka)[RUN]["checkpoints"]) == 400
    first.stop()
    await run

    results = [f.result(RUN, f"{BIG_ROOT}/c{i}", "VALIDATED", {"acc": -1}) for i in range(100)]
    produce(kafka, results)
    second, run = await started(config, kafka)
    try:
        from ckptlog.processor.foldfile import fold_lines

        expected = fold_lines(lines + results, config.fold_settings()).fold.runs[RUN]
        view = _assembled(kafka)[RUN]
        assert len(view["checkpoints"]) == 300 and view == run_view(expected)
    finally:
        second.stop()
        await asyncio.wait_for(run, 10)


def test_assembly_merges_only_what_the_head_can_own() -> None:
    """Under at_least_once an earlier owner may have published a batch it never committed: its pages
    can hold reports the new owner's head has not counted yet. Assembly leaves out every entry at or
    above the head's `committed`, and any entry outside its page."""

    def entry(index: int) -> dict[str, Any]:
        return {"path": f"/c{index}", "metrics": {}, "status": "COMMITTED", "report_index": index, "sort": None}

    head = {"checkpoints": [], "latest": "/c33", "best": "/c33", "committed": 34, "validated": 34}
    head |= {"generation": 0, "index_in_generation": 34, "pages": {"span": 32}}
    parts = {
        (0, 0): {"run": "r", "page": 0, "part": 0, "parts": 1, "checkpoints": [entry(5), entry(40)]},
        (1, 0): {"run": "r", "page": 1, "part": 0, "parts": 1, "checkpoints": [entry(33), entry(34), entry(50)]},
        (2, 0): {"run": "r", "page": 2, "part": 0, "parts": 1, "checkpoints": [entry(64)]},
    }
    assert [c["report_index"] for c in assemble(head, parts)["checkpoints"]] == [5, 33]
