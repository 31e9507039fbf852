"""A reopened run's retired claim (contract §3 "Reopened runs", §9) on real trees: removed for the
reopened run's own root only, never leaving the root without a claim naming the run, ordered
against a later retirement, held for deletions meanwhile, and re-driven after a crash between the
reopen's commit and the removal."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import fsspec
import pytest

from ckptlog.client import ids
from ckptlog.events.paths import CLAIM_DIR, normalize
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.service.partition import PartitionTask
from ckptlog.processor.storage import claim_writer
from ckptlog.processor.storage.claim_writer import claim_all
from ckptlog.processor.storage.claims import Claimant, Shared, claim_name
from ckptlog.processor.storage.deletion import Deleter
from ckptlog.processor.storage.local_tree import LocalDir
from ckptlog.processor.storage.safety import Outcome, Refused
from ckptlog.processor.storage.tree import remove_all
from tests import factories as f
from tests.unit.service.test_batch import records
from tests.unit.service.test_partition import idle
from tests.unit.storage.test_attack_retired_claims import _task

A, A1 = Claimant("a", "t[0]"), Claimant("a", "t[1]")
RETIRED, RETIRED_1 = A._replace(retired=True), A1._replace(retired=True)
A_P = Claimant("a", str(PartitionId("in", 0)))  # as the service's task (tests/unit/storage/test_attack_retired_claims)
RETIRED_P = A_P._replace(retired=True)


class Tree:
    """`{base}/a/c0` (kept), `{base}/a/c1` (evicted after the reopen), `{base}/b` another run's root,
    on a local directory or in fsspec's memory filesystem (the remote walks)."""

    def __init__(self, tmp_path: Path, protocol: str) -> None:
        self.protocol = protocol
        if protocol == "file":
            self.base, self.outer = tmp_path / "sr", normalize(f"file://{tmp_path}/sr")
        else:
            self.base, self.outer = Path(f"/reopen-{tmp_path.name}"), f"memory://reopen-{tmp_path.name}"
        for name in ("a/c0", "a/c1", "b/c0"):
            self.write(f"{name}/model.bin", b"data")

    def url(self, rel: str) -> str:
        return f"{self.outer}/{rel}"

    def write(self, rel: str, data: bytes) -> None:
        if self.protocol == "file":
            (self.base / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.base / rel).write_bytes(data)
        else:
            fsspec.filesystem("memory").pipe_file(f"{self.base}/{rel}", data)

    def names(self, rel: str) -> set[str]:
        if self.protocol == "file":
            return {p.name for p in (self.base / rel).iterdir()} if (self.base / rel).exists() else set()
        fs = fsspec.filesystem("memory")
        return (
            {p.rsplit("/", 1)[-1] for p in fs.ls(f"{self.base}/{rel}", detail=False)}
            if fs.exists(f"{self.base}/{rel}")
            else set()
        )

    def exists(self, rel: str) -> bool:
        if self.protocol == "file":
            return (self.base / rel).exists()
        return bool(fsspec.filesystem("memory").exists(f"{self.base}/{rel}"))

    def close(self) -> None:
        if self.protocol == "memory":
            fsspec.filesystem("memory").rm(str(self.base), recursive=True)


@pytest.fixture(params=["file", "memory"])
def tree(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Tree]:
    made = Tree(tmp_path, request.param)
    yield made
    made.close()


def _retire(tree: Tree, *claims: tuple[str, Claimant]) -> None:
    assert claim_all([(tree.url(root), me) for root, me in claims], tree.outer, {}) == [None] * len(claims)


def test_a_reopen_removes_its_own_retired_claim_and_its_deletions_go_through(tree: Tree) -> None:
    _retire(tree, ("a", A), ("a", RETIRED), ("b", Claimant("b", "t[0]")))
    (before,) = remove_all([(tree.url("a/c1"), tree.url("a"), A)], {}, tree.outer)
    assert isinstance(before, Refused) and "finished" in before.reason  # retired: barred, the run's own id too
    assert claim_all([(tree.url("a"), A)], tree.outer, {}, reopened=True) == [None]
    assert tree.names(f"a/{CLAIM_DIR}") == {claim_name(A)}  # its live claim stays, the retired one is gone
    assert remove_all([(tree.url("a/c1"), tree.url("a"), A)], {}, tree.outer) == [None]
    assert not tree.exists("a/c1") and tree.exists("a/c0/model.bin")


@pytest.mark.parametrize("other", [Claimant("b", "t[0]"), A1, Claimant("a")], ids=["run", "partition", "offline"])
def test_after_a_reopen_no_other_claimant_deletes_in_the_root(tree: Tree, other: Claimant) -> None:
    """The root keeps the reopened run's live claim: another run, the same id folded by another
    partition, are refused as ever. (An offline `fold --apply` of the same id, source None, owns
    every partition's live claim: it is the run's own fold, as before the run finished.)"""
    _retire(tree, ("a", A), ("a", RETIRED))
    assert claim_all([(tree.url("a"), A)], tree.outer, {}, reopened=True) == [None]
    (outcome,) = remove_all([(tree.url("a/c1"), tree.url("a"), other)], {}, tree.outer)
    if other.source is None:
        assert outcome is None
    else:
        assert isinstance(outcome, Refused) and not outcome.retry and "'a'" in outcome.reason
        assert tree.exists("a/c1/model.bin")


def test_a_reopen_removes_only_its_own_retired_claim(tree: Tree) -> None:
    """The same run id retired by another partition too (records keyed astray), and another run's
    retired root beside it: both stay, and both still bar."""
    _retire(tree, ("a", A), ("a", RETIRED), ("a", RETIRED_1), ("b", Claimant("b", "t[0]")))
    _retire(tree, ("b", Claimant("b", "t[0]", retired=True)))
    (outcome,) = claim_all([(tree.url("a"), A)], tree.outer, {}, reopened=True)
    assert isinstance(outcome, Shared) and "'a' (t[1]) (finished)" in outcome.reason  # told: root_shared
    assert tree.names(f"a/{CLAIM_DIR}") == {claim_name(A), claim_name(RETIRED_1)}
    assert claim_name(Claimant("b", "t[0]", retired=True)) in tree.names(f"b/{CLAIM_DIR}")
    for path, root, me in (("a/c1", "a", A), ("b/c0", "b", Claimant("b", "t[0]"))):
        (outcome,) = remove_all([(tree.url(path), tree.url(root), me)], {}, tree.outer)
        assert isinstance(outcome, Refused) and "finished" in outcome.reason, outcome
        assert tree.exists(f"{path}/model.bin")


def test_a_reopen_writes_the_live_claim_before_it_removes_the_retired_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The root never stands without a claim naming the run: where the live claim was lost (or
    never written: a restore claims no finished run as live), the removal sees it in place first."""
    sr = tmp_path / "sr"
    (sr / "a" / "c1").mkdir(parents=True)
    outer = normalize(f"file://{sr}")
    assert claim_all([(f"{outer}/a", RETIRED)], outer, {}) == [None]
    assert {p.name for p in (sr / "a" / CLAIM_DIR).iterdir()} == {claim_name(RETIRED)}
    seen: list[set[str]] = []
    remove = LocalDir.remove_claim

    def watched(here: LocalDir, claimant: Claimant, root: str) -> Refused | None:
        seen.append(set(os.listdir(f"/proc/self/fd/{here.fd}/{CLAIM_DIR}")))
        return remove(here, claimant, root)

    monkeypatch.setattr(LocalDir, "remove_claim", watched)
    assert claim_all([(f"{outer}/a", A)], outer, {}, reopened=True) == [None]
    assert seen == [{claim_name(A), claim_name(RETIRED)}]
    assert {p.name for p in (sr / "a" / CLAIM_DIR).iterdir()} == {claim_name(A)}


def test_a_directory_by_the_retired_claims_name_is_left_and_still_bars(tmp_path: Path) -> None:
    sr = tmp_path / "sr"
    (sr / "a" / "c1").mkdir(parents=True)
    outer = normalize(f"file://{sr}")
    assert claim_all([(f"{outer}/a", A)], outer, {}) == [None]
    (sr / "a" / CLAIM_DIR / claim_name(RETIRED)).mkdir()
    (outcome,) = claim_all([(f"{outer}/a", A)], outer, {}, reopened=True)
    assert isinstance(outcome, Refused) and not outcome.retry and "by hand" in outcome.reason
    assert (sr / "a" / CLAIM_DIR / claim_name(RETIRED)).is_dir()
    (removed,) = remove_all([(f"{outer}/a/c1", f"{outer}/a", A)], {}, outer)
    assert isinstance(removed, Refused) and (sr / "a" / "c1").is_dir()


def test_a_reopen_writes_nothing_through_a_symlinked_root(tmp_path: Path) -> None:
    sr, target = tmp_path / "sr", tmp_path / "elsewhere"
    sr.mkdir()
    (target / CLAIM_DIR).mkdir(parents=True)
    (target / CLAIM_DIR / claim_name(RETIRED)).write_bytes(b"{}")
    (sr / "a").symlink_to(target, target_is_directory=True)
    outer = normalize(f"file://{sr}")
    (outcome,) = claim_all([(f"{outer}/a", A)], outer, {}, reopened=True)
    assert isinstance(outcome, Refused) and not outcome.retry
    assert {p.name for p in (target / CLAIM_DIR).iterdir()} == {claim_name(RETIRED)}  # untouched


# -- the order of writes and removals, and the hold (claim_writer.ClaimWriter) ---------------------


def _local(tmp_path: Path, claimed: bool = True) -> tuple[Path, str, str]:
    """`{sr}/a/c0` and `c1`, `a` claimed by run a of t[0] (`claimed`)."""
    sr = tmp_path / "sr"
    for name in ("c0", "c1"):
        (sr / "a" / name).mkdir(parents=True)
        (sr / "a" / name / "model.bin").write_bytes(b"data")
    outer = normalize(f"file://{sr}")
    if claimed:
        assert claim_all([(f"{outer}/a", A)], outer, {}) == [None]
    return sr, outer, f"{outer}/a"


async def test_a_removal_asked_for_after_a_later_retirement_is_dropped(tmp_path: Path) -> None:
    """The service asks for a reopen's removal once its batch committed; the next batch, folded
    meanwhile, may have retired the run again and asked for the retired claim first."""
    sr, outer, root = _local(tmp_path)
    deleter = Deleter(outer_root=outer)
    deleter.claim_many([(root, "a")], "t[0]", retired=True, at=20)  # retired again at offset 20
    deleter.claim_many([(root, "a")], "t[0]", reopened=True, at=10)  # the reopen at offset 10: stale now
    assert await deleter.claims.drain(10)
    assert claim_name(RETIRED) in {p.name for p in (sr / "a" / CLAIM_DIR).iterdir()}
    deleter.claim_many([(root, "a")], "t[0]", reopened=True, at=30)  # reopened once more: it goes
    assert await deleter.claims.drain(10)
    assert {p.name for p in (sr / "a" / CLAIM_DIR).iterdir()} == {claim_name(A)}
    deleter.claim_many([(root, "a")], "t[0]", retired=True, at=40)  # and retired again: written again
    assert await deleter.claims.drain(10)
    assert claim_name(RETIRED) in {p.name for p in (sr / "a" / CLAIM_DIR).iterdir()}
    assert not deleter.claims.held
    await deleter.close()


async def test_a_reopen_while_the_retired_claim_is_being_written_removes_it_after_and_holds_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The retired claim's write is blocked in its worker thread; the run is reopened and a
    deletion of it submitted meanwhile. The deletion waits (held: were it let through, it would be
    refused for good once the write lands), the removal runs after the write, then the deletion
    goes through."""
    sr, outer, root = _local(tmp_path)
    writing, release = threading.Event(), threading.Event()

    def blocked(
        claims: Sequence[tuple[str, Claimant]],
        outer_root: str | None,
        options: Mapping[str, Mapping[str, Any]],
        **kw: Any,
    ) -> list[Outcome | Shared]:
        if any(me.retired for _, me in claims):
            writing.set()
            assert release.wait(timeout=30)
        return claim_all(claims, outer_root, options, **kw)

    monkeypatch.setattr(claim_writer, "claim_all", blocked)
    refused: list[tuple[tuple[str, str], str]] = []
    deleter = Deleter(outer_root=outer, on_refused=refused.extend)
    loop = asyncio.get_running_loop()
    try:
        deleter.claim_many([(root, "a")], "t[0]", retired=True, at=5)
        await _until(loop, writing.is_set, "the retired claim's write never started")
        deleter.claim_many([(root, "a")], "t[0]", reopened=True, at=9)
        ckpt = f"{root}/c1"
        assert deleter.submit("a", ckpt, root, "t[0]")
        await asyncio.sleep(0.5)
        assert ("a", ckpt) in deleter.outstanding and deleter.claims.held and (sr / "a" / "c1").exists()
    finally:
        release.set()
    assert await deleter.drain(timeout=10)
    assert not refused and not (sr / "a" / "c1").exists() and (sr / "a" / "c0").exists()
    assert {p.name for p in (sr / "a" / CLAIM_DIR).iterdir()} == {claim_name(A)} and not deleter.claims.held
    await deleter.close()


async def _until(loop: asyncio.AbstractEventLoop, check: Callable[[], bool], why: str) -> None:
    deadline = loop.time() + 10
    while not check():
        assert loop.time() < deadline, why
        await asyncio.sleep(0.01)


async def test_a_removal_that_fails_is_retried_and_holds_the_runs_deletions_until_it_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sr, outer, root = _local(tmp_path)
    assert claim_all([(root, RETIRED)], outer, {}) == [None]
    failures = iter(["injected: storage is away"] * 2)

    def flaky(
        claims: Sequence[tuple[str, Claimant]],
        outer_root: str | None,
        options: Mapping[str, Mapping[str, Any]],
        **kw: Any,
    ) -> list[Outcome | Shared]:
        if kw.get("reopened"):
            why = next(failures, None)
            if why is not None:
                return [why] * len(claims)
        return claim_all(claims, outer_root, options, **kw)

    monkeypatch.setattr(claim_writer, "claim_all", flaky)
    deleter = Deleter(outer_root=outer)
    deleter.claims._delay = 0.05
    deleter.claim_many([(root, "a")], "t[0]", reopened=True, at=3)
    assert deleter.submit("a", f"{root}/c1", root, "t[0]")
    assert await deleter.drain(timeout=10)
    assert not (sr / "a" / "c1").exists() and deleter.claims.counts.failed == 2 and not deleter.refused
    await deleter.close()


# -- the service: after the commit, and again at a restore ------------------------------------------


async def _settled(task: PartitionTask, deleter: Deleter) -> None:
    await idle(task)
    assert await deleter.claims.drain(10)
    assert await deleter.drain(10)
    await idle(task)


async def test_a_crash_between_the_reopens_commit_and_the_removal_is_healed_as_the_restore_catches_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reopen's batch commits and the process dies before its retired claim is removed. The
    next process replays the log and, as it catches up, removes it: the reopened run's next
    eviction is deleted (not refused for good by its own retired claim), its kept one stays."""
    sr, outer, root = _local(tmp_path, claimed=False)
    lines = [
        f.started("a", root, keep=1, attr="acc"),
        f.report("a", {"acc": 1}, f"{root}/c0"),
        f.finished("a"),
        f.reopened("a", event_id=ids.reopened_id("a", 1)),
        f.report("a", {"acc": 2}, f"{root}/c1"),  # evicts c0: deleted once the retired claim is gone
    ]
    first = Deleter(outer_root=outer)
    seed = _task(tmp_path / "first", first, 0, 0)
    await seed.process(records(lines[:3]))
    await _settled(seed, first)
    assert claim_name(RETIRED_P) in {p.name for p in (sr / "a" / CLAIM_DIR).iterdir()}
    asked: list[tuple[str, str]] = []
    real = first.claim_many

    def dies_after_the_commit(claims: Any, source: Any = None, **kw: Any) -> int:
        if kw.get("reopened"):  # step 4 of the reopen's batch: the process is gone by now
            asked.extend(claims)
            return 0
        return real(claims, source, **kw)

    monkeypatch.setattr(first, "claim_many", dies_after_the_commit)
    await seed.process(records(lines[3:4], start=3))
    await _settled(seed, first)
    assert asked == [(root, "a")] and claim_name(RETIRED_P) in {p.name for p in (sr / "a" / CLAIM_DIR).iterdir()}
    await seed.close(graceful=False)
    await first.close()

    again = Deleter(outer_root=outer)  # the next process: no snapshot, the log replayed to offset 4
    task = _task(tmp_path / "again", again, 0, 4)
    await task.process(records(lines))
    await _settled(task, again)
    assert task.life.live and task.fold.runs["a"].reopened == 1
    assert {p.name for p in (sr / "a" / CLAIM_DIR).iterdir()} == {claim_name(A_P)}
    assert not (sr / "a" / "c0").exists() and (sr / "a" / "c1" / "model.bin").exists()
    assert not again.refused and not again.claims.shared
    await task.close(graceful=False)
    await again.close()


async def test_a_reopen_and_a_retirement_in_consecutive_batches_leave_the_retired_claim(tmp_path: Path) -> None:
    """The next batch folds while the reopen's batch commits: its retirement asks for the retired
    claim before the reopen asks for its removal (after its commit); the retirement stands."""
    sr, outer, root = _local(tmp_path, claimed=False)
    lines = [f.started("a", root, keep=1, attr="acc"), f.report("a", {"acc": 1}, f"{root}/c0"), f.finished("a")]
    deleter = Deleter(outer_root=outer)
    task = _task(tmp_path / "t", deleter, 0, 0)
    await task.process(records(lines))
    await _settled(task, deleter)
    await task.process(records([f.reopened("a", event_id=ids.reopened_id("a", 1))], start=3))
    await task.process(records([f.finished("a", event_id=ids.finished_id("a", 1))], start=4))  # before 3 commits
    await _settled(task, deleter)
    assert "a" in task.fold.retired
    assert claim_name(RETIRED_P) in {p.name for p in (sr / "a" / CLAIM_DIR).iterdir()}
    (outcome,) = remove_all([(f"{root}/c0", root, A_P)], {}, outer)  # and it bars, the run's own id too
    assert isinstance(outcome, Refused) and (sr / "a" / "c0").exists()
    await task.close(graceful=False)
    await deleter.close()
