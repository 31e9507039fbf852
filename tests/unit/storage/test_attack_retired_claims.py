"""Attack: retired claims (ckptlog/processor/storage/claims.py, contract §3 *Expiry*, §9) on real trees.

Each test here failed on the commit it was written against (094fe79); see the report.
"""

from __future__ import annotations

import logging
import tracemalloc
from pathlib import Path

import fsspec
import pytest

from ckptlog.events.paths import CLAIM_DIR, normalize
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.service.partition import PartitionTask, TaskParts, new_task
from ckptlog.processor.service.records import RecordFactory, TopicNames
from ckptlog.processor.service.restore import Restored
from ckptlog.processor.service.snapshotting import SnapshotScheduler
from ckptlog.processor.storage.claim_writer import claim_all
from ckptlog.processor.storage.claims import Claimant, claim_body, claim_name
from ckptlog.processor.storage.deletion import Deleter
from ckptlog.processor.storage.safety import Refused
from ckptlog.processor.storage.snapshots import SnapshotStore
from ckptlog.processor.storage.tree import remove_all
from tests import factories as f
from tests.unit.service.test_batch import records
from tests.unit.service.test_partition import Publisher, idle

PID = PartitionId("in", 0)


def _task(tmp_path: Path, deleter: Deleter, start: int, publish_from: int, fold: Fold | None = None) -> PartitionTask:
    fold = fold or Fold(FoldSettings())
    store = SnapshotStore(str(tmp_path / "snaps"), PID.topic, PID.partition)
    factory = RecordFactory(TopicNames("in", "c", "v", "w", "s", "d"), PID)
    parts = TaskParts(Publisher(), factory, SnapshotScheduler(PID, store, 10_000, 3600, None), deleter, None)
    task = new_task(PID, Restored(fold, start, publish_from, None, 0), parts)
    if start >= publish_from:
        task.catch_up()
    return task


async def test_a_restore_replaying_an_ordinary_finished_run_logs_no_root_shared(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A run starts after the last snapshot and finishes (its retired claim lands beside its
    claim). The process restarts: the replay from the snapshot folds its run_started again,
    registers its root and claims it as *live* — and that claim now meets the run's own retired
    claim, so an ordinary run is reported as `root_shared` (an ERROR whose runbook entry says two
    runs were given nesting roots) on every restore."""
    sr = tmp_path / "sr"
    sr.mkdir()
    outer = normalize(f"file://{sr}")
    root = f"{outer}/done"
    lines = [f.started("done", root), f.finished("done")]
    first = Deleter(outer_root=outer)
    seed = _task(tmp_path / "a", first, 0, 0)
    await seed.process(records(lines))
    await idle(seed)
    assert await first.claims.drain(10)
    assert claim_name(Claimant("done", str(PID), retired=True)) in {p.name for p in (sr / "done" / CLAIM_DIR).iterdir()}
    await seed.close(graceful=False)
    await first.close()

    caplog.clear()
    again = Deleter(outer_root=outer)  # the restarted process: the snapshot predates run_started
    task = _task(tmp_path / "b", again, 0, len(lines))
    with caplog.at_level(logging.ERROR):
        await task.process(records(lines))
        await idle(task)
        assert await again.claims.drain(10)
    assert task.life.live
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not again.claims.shared and not errors, errors
    await task.close(graceful=False)
    await again.close()


async def test_a_run_reusing_an_expired_ids_root_in_the_same_process_is_reported_as_shared(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Contract §3 *Expiry*: "A new run reusing the id and the root is told so as it claims the
    root (`root_shared`, an ERROR)". In the process that folded the old run, the new run's claim
    is the very (root, run, partition) it claimed for the old one, which the `ClaimWriter` claims once per
    process: it is skipped, and nothing is told (only a later restart would)."""
    sr = tmp_path / "sr"
    sr.mkdir()
    outer = normalize(f"file://{sr}")
    root = f"{outer}/r"
    lines = [
        f.started("r", root),
        f.finished("r"),
        f.started("other", f"{outer}/other"),
        f.finished("other"),  # the bound is 1: r's record expires, its id is unknown again
        f.started("r", root),  # a new run reusing the id and the root
    ]
    deleter = Deleter(outer_root=outer)
    task = _task(tmp_path, deleter, 0, 0, Fold(FoldSettings(finished_runs_kept=1)))
    with caplog.at_level(logging.ERROR):
        for at, line in enumerate(lines):
            await task.process(records([line], start=at))
            await idle(task)
            assert await deleter.claims.drain(10)
    assert "r" in task.fold.runs and task.fold.runs["r"].finished is None  # the new run
    shared = [r.getMessage() for r in caplog.records if "root_shared" in r.getMessage()]
    assert shared, "the new run of a reused id and root was not told (root_shared)"
    await task.close(graceful=False)
    await deleter.close()


def test_a_root_holding_a_pre_upgrade_claim_and_a_retired_claim_refuses_another_run_for_good(tmp_path: Path) -> None:
    """A claim written before claims named their partition (b5beb40^: `{"format", "run"}`, no
    "source") reads as Claimant(run, None). After the upgrade the processor writes the same
    run's claim and, as it retires, its retired claim beside it. Another run's deletion meeting
    that root must be refused (final); `others` sorts the claimants and None < str raises a
    TypeError instead, so the deletion is retried as a transient failure, never settled (the
    deleting run owes it for ever and never leaves the hot state)."""
    sr = tmp_path / "sr"
    (sr / "team" / "a" / "c0").mkdir(parents=True)
    outer = normalize(f"file://{sr}")
    team, root = f"{outer}/team", f"{outer}/team/a"
    assert claim_all([(root, Claimant("a", "t[0]"))], outer, {}) == [None]
    legacy = sr / "team" / "a" / CLAIM_DIR / claim_name(Claimant("a"))  # the old name: sha256(run id)
    legacy.write_bytes(b'{"format": "ckptlog.run-marker", "run": "a"}\n')
    assert claim_all([(root, Claimant("a", "t[0]", retired=True))], outer, {}) == [None]
    # a run whose root lies above (the fold allows it once a's record expired)
    (outcome,) = remove_all([(f"{team}/a", team, Claimant("team", "t[0]"))], {}, outer)
    assert isinstance(outcome, Refused) and not outcome.retry, outcome
    assert (sr / "team" / "a" / "c0").is_dir()


def test_a_huge_file_planted_in_a_remote_claim_directory_is_not_read_whole() -> None:
    """Local claims are read as their first 4096 bytes (local_tree._read_claim); on other protocols
    the claim reader (then `claimants_at`, now `RemoteDir.claimants`) read every object in the
    claim directory whole (`cat_file`), on every walk
    that meets it: a large object planted there (by the training job writing into its root, or
    anyone who can) costs its size in memory and egress per deletion. It must still count as
    nobody's claim, read as cheaply as a local one."""
    fs = fsspec.filesystem("memory")
    fs.pipe_file("/huge-claim/a/c0/model.bin", b"kept")
    outer, root, ckpt = "memory://huge-claim", "memory://huge-claim/a", "memory://huge-claim/a/c0"
    a = Claimant("a", "t[0]")
    try:
        assert claim_all([(root, a), (root, Claimant("a", "t[0]", retired=True))], outer, {}) == [None, None]
        fs.pipe_file(f"/huge-claim/a/{CLAIM_DIR}/retired-planted", b" " * (64 << 20))
        tracemalloc.start()
        try:
            (outcome,) = remove_all([(ckpt, root, a)], {}, outer)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert isinstance(outcome, Refused) and not outcome.retry, outcome
        assert peak < 8 << 20, f"the walk held {peak >> 20} MB to read a 64 MB object in the claim directory"
    finally:
        fs.rm("/huge-claim", recursive=True)


@pytest.mark.parametrize("protocol", ["file", "memory"])
def test_a_file_by_a_retired_claims_name_that_says_it_is_live_bars_the_run_id_too(
    tmp_path: Path, protocol: str
) -> None:
    """The processor writes a retired claim only if nothing has its name (`_write_claim`: an
    existing name is taken as written), and reads a claim by its body alone. A file named
    `retired-{hash}` whose body is the live claim (`"retired"` absent or false: forged, or copied
    over it by hand) so stands for the retired claim, and lets the run id reused delete the
    finished run's checkpoints. A claim under a retired claim's name must never read as live."""
    a, retired = Claimant("a", "t[0]"), Claimant("a", "t[0]", retired=True)
    if protocol == "file":
        sr = tmp_path / "sr"
        (sr / "a" / "c0").mkdir(parents=True)
        outer = normalize(f"file://{sr}")
        assert claim_all([(f"{outer}/a", a)], outer, {}) == [None]
        (sr / "a" / CLAIM_DIR / claim_name(retired)).write_bytes(claim_body(a))
    else:
        fs = fsspec.filesystem("memory")
        fs.pipe_file("/forged-retired/a/c0/model.bin", b"kept")
        outer = "memory://forged-retired"
        assert claim_all([(f"{outer}/a", a)], outer, {}) == [None]
        fs.pipe_file(f"/forged-retired/a/{CLAIM_DIR}/{claim_name(retired)}", claim_body(a))
    try:
        assert claim_all([(f"{outer}/a", retired)], outer, {}) == [None]  # "written": the name is there
        (outcome,) = remove_all([(f"{outer}/a/c0", f"{outer}/a", a)], {}, outer)
        assert isinstance(outcome, Refused) and not outcome.retry, outcome
    finally:
        if protocol == "memory":
            fsspec.filesystem("memory").rm("/forged-retired", recursive=True)


def test_no_claim_is_written_for_a_root_outside_the_storage_root_through_a_symlink(tmp_path: Path) -> None:
    """A restored state may hold roots outside today's --storage-root (the state was folded under
    another one: the fold checks a root against the bound only as the run starts). The restore
    then claims them all — live roots, and every finished record's retired claim — and a root
    that is not below the bound is opened as *trusted*: resolved through any symlink and written,
    as root, wherever that leads, outside --storage-root (then markers.open_root, now
    tree.reach_root: "no claim is written outside the resolved bound"). Such a root must get no claim."""
    sr, target = tmp_path / "sr", tmp_path / "system"
    sr.mkdir()
    target.mkdir()
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "a").symlink_to(target, target_is_directory=True)
    outer, root = normalize(f"file://{sr}"), normalize(f"file://{tmp_path}/old/a")
    outcomes = claim_all([(root, Claimant("a", "t[0]", retired=True)), (f"{root}/b", Claimant("b", "t[0]"))], outer, {})
    assert list(target.iterdir()) == [], outcomes
    assert all(isinstance(o, Refused) for o in outcomes), outcomes


async def test_a_restore_logs_no_error_for_a_finished_run_whose_root_was_archived_behind_a_symlink(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A careless but harmless move: a finished run's directory is archived to another disk and
    a symlink left in its place. No deletion can ever reach through it (walks refuse links), so
    there is nothing for a retired claim to guard; yet every restore asks for the retired claim
    of every finished record again, and this one is refused and logged as an ERROR
    (`root_claim_refused`, the CkptlogRunRootShared alert: "give each run a directory of its
    own") at every restart, for a run that did nothing wrong."""
    sr, archive = tmp_path / "sr", tmp_path / "archive"
    (archive / "a" / "c0").mkdir(parents=True)
    sr.mkdir()
    (sr / "a").symlink_to(archive / "a", target_is_directory=True)
    outer = normalize(f"file://{sr}")
    deleter = Deleter(outer_root=outer)
    with caplog.at_level(logging.WARNING):
        deleter.claim_many([(f"{outer}/a", "a")], "t[0]", retired=True)  # PartitionTask.catch_up
        assert await deleter.claims.drain(10)
    await deleter.close()
    assert list((archive / "a").iterdir()) == [archive / "a" / "c0"]  # nothing written through the link
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors
