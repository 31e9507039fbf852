"""Retired claims (ckptlog/processor/storage/claims.py, contract §3 *Expiry*, §9) on real trees.

The fold forgets a finished run once its record expires; what then keeps its checkpoints is the
retired claim the processor wrote into its root as it retired. It bars every deletion that meets
it: the same run id (folded again, as a new run), an offline fold, and any other run. These
tests attack it as a careless user and a hostile tree would: a reused id, a root claimed by
another run, a root that is gone, a symlinked root, a forged claim, a restart writing it again.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import fsspec
import pytest

from ckptlog.events.paths import CLAIM_DIR, normalize
from ckptlog.processor.storage import claim_writer
from ckptlog.processor.storage.claim_writer import ClaimWriter, claim_all
from ckptlog.processor.storage.claims import Claimant, Shared, claim_name
from ckptlog.processor.storage.deletion import HOLD_S, Deleter
from ckptlog.processor.storage.safety import Outcome, Refused
from ckptlog.processor.storage.tree import remove_all

A, RETIRED_A = Claimant("a", "t[0]"), Claimant("a", "t[0]", retired=True)


def _tree(tmp_path: Path) -> tuple[Path, str, str, str]:
    sr = tmp_path / "sr"
    ckpt = sr / "a" / "c0"
    ckpt.mkdir(parents=True)
    (ckpt / "model.bin").write_bytes(b"kept for good")
    outer = normalize(f"file://{sr}")
    return sr, outer, normalize(f"{outer}/a"), normalize(f"file://{ckpt}")


@pytest.mark.parametrize("deleter", [A, Claimant("a"), Claimant("a", "t[1]"), Claimant("b", "t[0]")])
def test_a_retired_claim_bars_every_deletion_in_its_root_the_same_run_ids_included(
    tmp_path: Path, deleter: Claimant
) -> None:
    sr, outer, root, ckpt = _tree(tmp_path)
    assert claim_all([(root, A), (root, RETIRED_A)], outer, {}) == [None, None]
    (outcome,) = remove_all([(ckpt, root, deleter)], {}, outer)
    assert isinstance(outcome, Refused) and not outcome.retry, outcome
    assert "finished" in outcome.reason and "new id" in outcome.reason
    assert (sr / "a" / "c0" / "model.bin").read_bytes() == b"kept for good"
    assert sorted(os.listdir(sr / "a" / CLAIM_DIR)) == sorted([claim_name(A), claim_name(RETIRED_A)])


def test_a_deletion_from_a_root_above_meets_the_retired_claim_on_its_way(tmp_path: Path) -> None:
    sr, outer, root, _ = _tree(tmp_path)
    assert claim_all([(root, RETIRED_A)], outer, {}) == [None]  # its live claim was never written
    (outcome,) = remove_all([(normalize(f"{outer}/a"), outer, Claimant("team", "t[0]"))], {}, outer)
    assert isinstance(outcome, Refused) and "finished" in outcome.reason
    assert (sr / "a" / "c0" / "model.bin").exists()


def test_a_retired_claim_is_written_into_a_root_another_run_claims_and_bars_that_run(tmp_path: Path) -> None:
    sr, outer, root, ckpt = _tree(tmp_path)
    b = Claimant("b", "t[0]")
    assert claim_all([(root, b)], outer, {}) == [None]  # b took the root before a's retired claim landed
    assert claim_all([(root, RETIRED_A)], outer, {}) == [None]
    (outcome,) = remove_all([(ckpt, root, b)], {}, outer)
    assert isinstance(outcome, Refused) and "finished" in outcome.reason
    assert (sr / "a" / "c0").is_dir()


def test_a_retired_claim_for_a_root_that_is_gone_makes_nothing(tmp_path: Path) -> None:
    sr, outer, _, _ = _tree(tmp_path)
    gone = normalize(f"{outer}/gone/deeper")
    assert claim_all([(gone, RETIRED_A)], outer, {}) == [None]
    assert not (sr / "gone").exists()


def test_a_retired_claim_is_never_written_through_a_symlink_below_the_bound(tmp_path: Path) -> None:
    sr, outer, _, _ = _tree(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (sr / "link").symlink_to(elsewhere, target_is_directory=True)
    (outcome,) = claim_all([(normalize(f"{outer}/link"), RETIRED_A)], outer, {})
    assert isinstance(outcome, Refused) and "symlink" in outcome.reason
    assert list(elsewhere.iterdir()) == []


def test_writing_a_retired_claim_again_after_a_restart_changes_nothing(tmp_path: Path) -> None:
    sr, outer, root, _ = _tree(tmp_path)
    assert claim_all([(root, A), (root, RETIRED_A)], outer, {}) == [None, None]
    before = (sr / "a" / CLAIM_DIR / claim_name(RETIRED_A)).stat()
    assert claim_all([(root, RETIRED_A)], outer, {}) == [None]
    after = (sr / "a" / CLAIM_DIR / claim_name(RETIRED_A)).stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)


def test_a_run_reusing_a_finished_runs_id_and_root_is_told_the_root_is_shared(tmp_path: Path) -> None:
    """The processor claims a finished run's root again only for a new run of that id (a restart
    claims the live roots only); that claim is reported, naming the finished run."""
    _, outer, root, _ = _tree(tmp_path)
    assert claim_all([(root, A), (root, RETIRED_A)], outer, {}) == [None, None]
    (outcome,) = claim_all([(root, A)], outer, {})
    assert isinstance(outcome, Shared) and "(finished)" in outcome.reason, outcome


@pytest.mark.parametrize("body", [b'{"run": "a", "source": "t[0]", "retired": "yes"}', b'{"run": "a", "retired": 1}'])
def test_a_forged_retired_flag_that_is_not_a_boolean_counts_as_nobodys(tmp_path: Path, body: bytes) -> None:
    sr, outer, root, ckpt = _tree(tmp_path)
    assert claim_all([(root, A)], outer, {}) == [None]
    (sr / "a" / CLAIM_DIR / "run-forged").write_bytes(body)
    (outcome,) = remove_all([(ckpt, root, A)], {}, outer)
    assert isinstance(outcome, Refused) and (sr / "a" / "c0").is_dir()


def test_a_retired_claim_bars_deletions_on_other_protocols_too() -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe_file("/retired-test/a/c0/model.bin", b"kept for good")
    outer, root, ckpt = "memory://retired-test", "memory://retired-test/a", "memory://retired-test/a/c0"
    assert claim_all([(root, A), (root, RETIRED_A), ("memory://retired-test/gone", RETIRED_A)], outer, {}) == [
        None,
        None,
        None,
    ]
    (outcome,) = remove_all([(ckpt, root, A)], {}, outer)
    assert isinstance(outcome, Refused) and "finished" in outcome.reason
    assert fs.cat_file("/retired-test/a/c0/model.bin") == b"kept for good"
    assert not fs.exists("/retired-test/gone")
    fs.rm("/retired-test", recursive=True)


async def test_holds_names_paths_at_in_and_around_a_root_being_retired() -> None:
    claims = ClaimWriter(outer_root=None)
    claims.claim_many([("file:///sr/team/a", "a")], "t[0]", retired=True)
    assert claims.holds("file:///sr/team/a") and claims.holds("file:///sr/team/a/c0/x")
    assert claims.holds("file:///sr/team")  # a checkpoint holding the root
    assert not claims.holds("file:///sr/team/ab") and not claims.holds("file:///sr/other/c0")
    await claims.close()


async def test_a_deletion_waits_for_the_retired_claim_queued_before_it_then_is_refused(tmp_path: Path) -> None:
    """The service queues a run's retired claim as it folds the retirement, and a later run's
    deletions only after their commit; this is the order that matters, in one loop turn."""
    sr, outer, root, ckpt = _tree(tmp_path)
    deleter = Deleter(outer_root=outer)
    deleter.claim_many([(root, "a")], "t[0]", retired=True)
    assert deleter.submit("a", ckpt, root, "t[0]")  # the run id reused, as a new run would
    assert await deleter.drain(timeout=10)
    assert "finished" in deleter.refused[("a", ckpt)] and (sr / "a" / "c0" / "model.bin").exists()
    assert not deleter.claims.held
    await deleter.close()
    await asyncio.sleep(0)


async def test_a_deletion_in_a_root_whose_retired_claim_is_unwritten_is_held_a_siblings_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hold itself (Deleter._not_held), with no race to win: the retired claim's write is
    blocked in its worker thread until released. Meanwhile a deletion in that root is held (no
    claim on disk would refuse it: without the hold it would be carried out), one in a sibling
    run's root goes through; once the claim is written, the held deletion meets it and is refused."""
    sr, outer, root, ckpt = _tree(tmp_path)
    (sr / "b" / "c0").mkdir(parents=True)
    (sr / "b" / "c0" / "model.bin").write_bytes(b"evicted")
    b_root, b_ckpt = normalize(f"{outer}/b"), normalize(f"file://{sr}/b/c0")
    assert claim_all([(b_root, Claimant("b", "t[0]"))], outer, {}) == [None]
    writing, release = threading.Event(), threading.Event()

    def blocked_claim_all(
        claims: Sequence[tuple[str, Claimant]], outer_root: str | None, options: Mapping[str, Mapping[str, Any]]
    ) -> list[Outcome | Shared]:
        if any(claimant.retired for _, claimant in claims):
            writing.set()
            assert release.wait(timeout=30), "the test never released the retired claim's write"
        return claim_all(claims, outer_root, options)

    monkeypatch.setattr(claim_writer, "claim_all", blocked_claim_all)
    refused: list[tuple[tuple[str, str], str]] = []
    # one job slot: both deletions share one job, so were `a`'s not held it would be gone with `b`'s
    deleter = Deleter(outer_root=outer, concurrency=1, on_refused=refused.extend)
    loop = asyncio.get_running_loop()
    try:
        deleter.claim_many([(root, "a")], "t[0]", retired=True)
        deadline = loop.time() + 10
        while not writing.is_set():  # the claim's worker thread is inside the (blocked) write
            assert loop.time() < deadline, "the retired claim's write never started"
            await asyncio.sleep(0.01)
        assert deleter.submit("a", ckpt, root, "t[0]")  # the run id reused, as a new run would
        assert deleter.submit("b", b_ckpt, b_root, "t[0]")
        deadline = loop.time() + 10
        while ("b", b_ckpt) in deleter.outstanding:  # (b) the sibling root's deletion goes through
            assert loop.time() < deadline, "the sibling root's deletion never went through"
            await asyncio.sleep(0.01)
        assert not (sr / "b" / "c0").exists() and deleter.counts.deleted == 1
        held_until = loop.time() + 5 * HOLD_S
        while loop.time() < held_until:  # (a) held, through several HOLD_S looks, while the claim is unwritten
            assert (sr / "a" / "c0" / "model.bin").read_bytes() == b"kept for good"
            assert ("a", ckpt) in deleter.outstanding and not refused and deleter.claims.held
            await asyncio.sleep(HOLD_S / 4)
        assert not (sr / "a" / CLAIM_DIR).exists()  # nothing on disk bars it yet: only the hold does
    finally:
        release.set()
    assert await deleter.drain(timeout=10)  # (c) the claim written, the held deletion meets it
    assert [key for key, _ in refused] == [("a", ckpt)] and "finished" in refused[0][1]
    assert "finished" in deleter.refused[("a", ckpt)] and (sr / "a" / "c0" / "model.bin").exists()
    assert not deleter.claims.held and deleter.counts.deleted == 1
    await deleter.close()
    await asyncio.sleep(0)
