"""Refused deletions settled per run (completions.py `DeletionOutcomes.refused`): a call's refusals
come grouped by run, so each owner is looked up once per run and writes one completion per run
(chunked as `deletions_settled` chunks them), not one per path; and exactly the refusals the
per-path form settled are settled: a run no partition here holds writes nothing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ckptlog.kafka.records import OutRecord
from ckptlog.processor.service.completions import CompletionWriter, DeletionOutcomes
from ckptlog.processor.service.pipeline import run_of
from ckptlog.processor.storage.deletion import Key
from tests.unit.service.test_recheck import folded


class Held:
    """A SharedProducer that is never started: the writer only queues."""

    async def start(self) -> None: ...

    async def publish(self, records: Sequence[OutRecord]) -> None: ...

    async def stop(self) -> None: ...


def settled(records: list[OutRecord]) -> list[tuple[str, str, str]]:
    """(run, path, why) of every refused entry the completions carry."""
    out = []
    for record in records:
        body = json.loads(record.value or b"")
        out += [(body["subject"], e["checkpoint_path"], e["reason"]) for e in body["data"]["refused"]]
    return sorted(out)


async def test_refusals_become_one_completion_per_run_and_call(tmp_path: Path) -> None:
    a = await folded(tmp_path, 0, "file:///nowhere/a", "run")
    b = await folded(tmp_path, 1, "file:///nowhere/b", "other")
    owed = sorted([(d.run_id, d.path) for t in (a, b) for d in t.fold.owed()], key=lambda k: k[0])
    refused: list[tuple[Key, str]] = [(key, f"why {n}") for n, key in enumerate(owed)]
    refused.append((("gone", "file:///nowhere/a/gone/c"), "why gone"))  # no partition here holds it
    runs = {run_of(key) for key, _ in refused[:-1]}
    assert len(runs) == 4 and len(owed) > len(runs)
    grouped, one_by_one = DeletionOutcomes(lambda: [a, b]), DeletionOutcomes(lambda: [a, b])
    grouped.writer, one_by_one.writer = CompletionWriter(Held()), CompletionWriter(Held())
    grouped.refused(refused)
    for item in refused:
        one_by_one.refused([item])
    got, before = grouped.writer._queue, one_by_one.writer._queue
    assert len(got) == len(runs) and len(before) == len(owed), "one completion per run, not per path"
    assert sorted(r.key or b"" for r in got) == sorted(k.encode() for k in runs)
    assert settled(got) == settled(before) == sorted((k[0], k[1], why) for k, why in refused[:-1])
    assert {(r.topic, r.partition) for r in got} == {("in", 0), ("in", 1)}
    await a.close(graceful=True)
    await b.close(graceful=True)
