"""Check 3 (contract §9, still owed) asked once per Deleter job: `DeletionOutcomes.still_owed_many` over
real partition tasks gives every path the verdict the per-path re-check gives it, in order, whatever
the job mixes (runs of two partitions interleaved, a run no partition holds, a path live again, a
respelled or unsafe path, a partition closed meanwhile); and a real Deleter on a real tree deletes
exactly the paths it lets through."""

from __future__ import annotations

import os
from pathlib import Path

from ckptlog.kafka.records import PartitionId
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.lifecycle import deletion_problem
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.service.completions import NOT_OWNED, DeletionOutcomes
from ckptlog.processor.service.harness import workload
from ckptlog.processor.service.partition import PartitionTask, TaskParts, new_task
from ckptlog.processor.service.pipeline import run_of
from ckptlog.processor.service.records import RecordFactory, TopicNames
from ckptlog.processor.service.restore import Restored
from ckptlog.processor.service.snapshotting import SnapshotScheduler
from ckptlog.processor.storage.deletion import Deleter, Key, RetryPolicy
from ckptlog.processor.storage.safety import Checks
from ckptlog.processor.storage.snapshots import SnapshotStore
from tests import factories as f
from tests.unit.service.test_batch import records
from tests.unit.service.test_partition import Publisher, Storage, idle


async def folded(tmp_path: Path, partition: int, root: str, prefix: str) -> PartitionTask:
    """A task of partition in[`partition`] that folded two runs (`prefix`-0, -1) under `root`, keep=1."""
    pid = PartitionId("in", partition)
    lines = [
        line.replace(b"run-", prefix.encode() + b"-")
        for line in workload(root, runs=2, reports=12, keep=1, validation_share=0.0)
    ]
    store = SnapshotStore(str(tmp_path / f"snaps-{partition}"), pid.topic, pid.partition)
    parts = TaskParts(
        Publisher(), RecordFactory(TopicNames("in", "c", "v", "w", "s", "d"), pid),
        SnapshotScheduler(pid, store, 10_000, 3600, None), Storage(), Storage(), None,
    )  # fmt: skip
    task = new_task(pid, Restored(Fold(FoldSettings()), 0, 0, None, 0), parts)
    task.catch_up()
    await task.process(records(lines))
    await idle(task)
    return task


def one_by_one(tasks: list[PartitionTask], keys: list[Key]) -> list[str | None]:
    """The re-check per path as it was before the batch form: the owner, then the run's state."""
    whys: list[str | None] = []
    for run_id, path in keys:
        owner = next((t for t in tasks if run_id in t.fold.runs), None)
        if owner is None:
            whys.append(NOT_OWNED)
        elif not owner.pipeline.usable:
            whys.append(f"{owner.pid} is closed here; its next owner re-drives what is still owed")
        else:
            whys.append(deletion_problem(owner.fold.runs[run_id], path))
    return whys


async def test_one_call_per_job_gives_each_path_its_own_verdict_in_order(tmp_path: Path) -> None:
    a = await folded(tmp_path, 0, "file:///nowhere/a", "run")
    b = await folded(tmp_path, 1, "file:///nowhere/b", "other")
    owed_a = [(d.run_id, d.path) for d in a.fold.owed()]
    owed_b = [(d.run_id, d.path) for d in b.fold.owed()]
    assert len(owed_a) >= 4 and len(owed_b) >= 2
    live = ("run-0", a.fold.runs["run-0"].latest.path)  # type: ignore[union-attr]
    respelled = ("run-1", owed_a[-1][1].replace("file:///", "file:////") + "/")
    keys = [
        owed_a[0], owed_b[0], live, ("gone", "file:///nowhere/a/gone/c"), respelled, owed_b[1],
        ("run-0", "file:///nowhere/a/run-0/../../etc"), ("run-0", "file:///nowhere/a/run-0/never-evicted"), owed_a[1],
    ]  # fmt: skip
    tasks = [a, b]
    outcomes = DeletionOutcomes(lambda: tasks)
    expected = one_by_one(tasks, keys)
    assert outcomes.still_owed_many(keys) == expected
    assert [outcomes.still_owed(key) for key in keys] == expected
    assert expected[0] is None and expected[1] is None and expected[4] is None  # owed, the respelled one too
    assert expected[2] is not None and "live" in expected[2] and expected[3] == NOT_OWNED
    assert expected[6] is not None and expected[6].startswith("unsafe path")
    assert expected[7] is not None and "no longer owes" in expected[7]
    # the Deleter's checks: one call per job, the verdicts of one call per path
    per_path = Checks(recheck=outcomes.still_owed)
    batched = Checks(recheck_many=outcomes.still_owed_many)
    assert batched.before_removal_many(keys, [k[1] for k in keys]) == [
        per_path.before_removal(key, key[1]) for key in keys
    ]
    await b.close(graceful=True)  # partition in[1] revoked: its paths are not this instance's to delete now
    after = outcomes.still_owed_many(keys)
    assert after == one_by_one(tasks, keys)
    assert [after[1], after[5]] == ["in[1] is closed here; its next owner re-drives what is still owed"] * 2
    assert [after[i] for i in (0, 2, 3, 4, 6, 7, 8)] == [expected[i] for i in (0, 2, 3, 4, 6, 7, 8)]
    await a.close(graceful=True)


def tree(base: Path) -> dict[str, bytes]:
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


async def test_a_job_deletes_only_what_is_still_owed_when_paths_turn_live_and_partitions_go(tmp_path: Path) -> None:
    """A job mixing two partitions' runs on a real tree: between submission and the job's start one
    owed path is settled (a completion folded: no longer owed) and partition in[1] is revoked (its paths stay for
    its next owner); the rest is deleted, and nothing outside the checkpoints is touched."""
    base = tmp_path / "tree"
    outer = f"file://{base}/runs"
    a = await folded(tmp_path, 0, f"{outer}/a", "run")
    b = await folded(tmp_path, 1, f"{outer}/b", "other")
    submitted = sorted([*a.fold.owed(), *b.fold.owed()], key=run_of)  # the processor hands them over by run
    every = {d.path for d in submitted} | {
        r.path for t in (a, b) for run in t.fold.runs.values() for r in (*run.checkpoints, run.latest) if r
    }
    for path in every:
        Path(path.removeprefix("file://"), "model.bin").parent.mkdir(parents=True, exist_ok=True)
        Path(path.removeprefix("file://"), "model.bin").write_bytes(path.encode())
    (base / "outside").mkdir()
    (base / "outside" / "keep.bin").write_bytes(b"x")
    again = next(d for d in submitted if d.run_id == "run-1")
    settled = f.settled("run-1", deleted=[(again.path, again.eviction)])  # another instance's completion
    await a.process(records([settled], start=1000))
    await idle(a)
    why = deletion_problem(a.fold.runs["run-1"], again.path)
    assert why == "the run no longer owes this deletion (already settled)"
    await b.close(graceful=True)
    before = tree(base)
    done: list[Key] = []
    outcomes = DeletionOutcomes(lambda: [a, b])
    deleter = Deleter(
        outer_root=outer, on_done=done.extend, recheck_many=outcomes.still_owed_many,
        concurrency=1, retry=RetryPolicy(max_attempts=1),
    )  # fmt: skip
    assert deleter.submit_many(submitted, "in[0]") == len(submitted)
    assert await deleter.drain(timeout=10)
    await deleter.close()
    gone = {d.path for d in submitted if d.run_id.startswith("run-") and d.path != again.path}
    assert {path for _, path in done} == gone and len(done) == len(gone)
    assert deleter.counts.dropped == len(submitted) - len(gone) == 1 + len(b.fold.owed())
    left = tree(base)
    assert all(not os.path.lexists(p.removeprefix("file://")) for p in gone)
    kept = {name: data for name, data in before.items() if f"file://{base}/{name}".rsplit("/", 1)[0] not in gone}
    assert left == kept and "outside/keep.bin" in left
    assert left[str(Path(again.path.removeprefix("file://"), "model.bin").relative_to(base))] == again.path.encode()
    await a.close(graceful=True)
