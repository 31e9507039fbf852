"""The leaner local walk (branch i39-unlink: `_Seen` a plain class, `_close_all` only when a descriptor is
still open, claim reads closed by try/finally, `claims.claimant_in` remembered by the claim's bytes),
attacked on a real tree: every outcome of a one-file checkpoint leaves no descriptor open and nothing
outside it changed, and a claim rewritten between two batches is read as it is now.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ckptlog.events.paths import CLAIM_DIR
from ckptlog.processor.storage import local_tree
from ckptlog.processor.storage.claims import UNREADABLE, Claimant, _parsed, claim_body, claim_name, claimant_in
from ckptlog.processor.storage.safety import Refused
from ckptlog.processor.storage.tree import remove_all

from .test_deletion_symlinks import tree
from .test_local_walk import between, remove

__all__ = ["between"]

ME, OTHER = Claimant("r1", "t[0]"), Claimant("b", "t[1]")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def untouched_but(base: Path, rel: str) -> Callable[[], bool]:
    """True while nothing below `base` changed but `rel` and what lies below it."""

    def strip(found: dict[str, bytes | str]) -> dict[str, bytes | str]:
        return {k: v for k, v in found.items() if k != rel and not k.startswith(rel + "/")}

    before = strip(tree(base))
    return lambda: strip(tree(base)) == before


@pytest.fixture
def one_file(base: Path) -> Path:
    ckpt = base / "runs/r1/ckpt"
    ckpt.mkdir()
    (ckpt / "model.bin").write_bytes(b"m" * 256)
    return ckpt


def test_deleted_no_descriptor_left_open(base: Path, one_file: Path) -> None:
    same, fds = untouched_but(base, "runs/r1/ckpt"), open_fds()
    assert remove(base) is None and not one_file.exists()
    assert open_fds() == fds and same()


@pytest.mark.parametrize("to", ["outside/victim", "runs/r1/kept"])
def test_swapped_for_a_link_after_the_scan_fails_touches_nothing_and_closes_everything(
    base: Path, one_file: Path, between: Callable[[Callable[[], None]], None], to: str
) -> None:
    def swap() -> None:
        (one_file / "model.bin").unlink()
        one_file.rmdir()
        one_file.symlink_to(base / to, target_is_directory=True)

    between(swap)
    fds = open_fds()
    outcome = remove(base)
    assert isinstance(outcome, str) and "retried" in outcome
    assert open_fds() == fds and one_file.is_symlink()
    assert (base / "outside/victim/model.bin").read_bytes() == b"precious"
    assert (base / "runs/r1/kept/model.bin").read_bytes() == b"kept"
    assert remove(base) is None and not one_file.is_symlink() and (base / to).is_dir()  # the retry unlinks the link


def test_moved_out_after_the_scan_is_left_whole_and_closed(
    base: Path, one_file: Path, between: Callable[[Callable[[], None]], None]
) -> None:
    between(lambda: one_file.rename(base / "outside/rescued"))
    fds = open_fds()
    assert remove(base) is None  # gone from its name: done, and the moved tree is not this deletion's
    assert open_fds() == fds and (base / "outside/rescued/model.bin").read_bytes() == b"m" * 256


def test_a_file_appearing_mid_walk_fails_closes_and_the_retry_removes_it(
    base: Path, one_file: Path, between: Callable[[Callable[[], None]], None]
) -> None:
    between(lambda: (one_file / "late.bin").write_bytes(b"late"))
    same, fds = untouched_but(base, "runs/r1/ckpt"), open_fds()
    outcome = remove(base)
    assert isinstance(outcome, str) and "appeared after its tree was checked" in outcome
    assert open_fds() == fds and (one_file / "late.bin").read_bytes() == b"late" and same()
    assert remove(base) is None and not one_file.exists() and same()


def test_a_crash_in_rmdir_closes_everything_and_the_retry_finishes(
    base: Path, one_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crashing(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(local_tree.os, "rmdir", crashing)
    same, fds = untouched_but(base, "runs/r1/ckpt"), open_fds()
    outcome = remove(base)
    monkeypatch.undo()
    assert isinstance(outcome, str) and "I/O error" in outcome
    assert open_fds() == fds and one_file.is_dir() and not (one_file / "model.bin").exists() and same()
    assert remove(base) is None and not one_file.exists() and same()


def test_another_runs_claim_inside_refuses_closes_and_keeps_everything(base: Path, one_file: Path) -> None:
    (one_file / CLAIM_DIR).mkdir()
    (one_file / CLAIM_DIR / claim_name(OTHER)).write_bytes(claim_body(OTHER))
    before, fds = tree(base), open_fds()
    outcome = remove(base)
    assert isinstance(outcome, Refused) and not outcome.retry
    assert open_fds() == fds and tree(base) == before


@pytest.mark.parametrize("plant", ["fifo", "directory", "link", "huge", "garbage"])
def test_a_planted_claim_at_the_root_refuses_and_every_descriptor_is_closed(
    base: Path, one_file: Path, plant: str
) -> None:
    claims = base / "runs/r1" / CLAIM_DIR
    claims.mkdir()
    (claims / claim_name(ME)).write_bytes(claim_body(ME))
    planted = claims / "run-planted"
    if plant == "fifo":
        os.mkfifo(planted)
    elif plant == "directory":
        planted.mkdir()
    elif plant == "link":
        planted.symlink_to(base / "outside/file.bin")
    elif plant == "huge":
        planted.write_bytes(b" " * 10_000_000 + claim_body(OTHER))  # read: its first 4096 bytes, blank
    else:
        planted.write_bytes(b"\xff{not json")
    before, fds = tree(base), open_fds()
    outcome = remove(base)
    assert isinstance(outcome, Refused) and "an unreadable claim" in outcome.reason.replace("\\x00", "")
    assert open_fds() == fds and tree(base) == before


def test_a_read_error_on_a_claim_fails_the_batch_closes_everything_and_the_retry_deletes(
    base: Path, one_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claims = base / "runs/r1" / CLAIM_DIR
    claims.mkdir()
    (claims / claim_name(ME)).write_bytes(claim_body(ME))

    def failing(fd: int, n: int) -> bytes:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(local_tree.os, "read", failing)
    same, fds = untouched_but(base, "runs/r1/ckpt"), open_fds()
    outcome = remove(base)
    monkeypatch.undo()
    assert isinstance(outcome, str) and "I/O error" in outcome
    assert open_fds() == fds and (one_file / "model.bin").exists() and same()
    assert remove(base) is None and not one_file.exists() and same()


@pytest.fixture
def claimed(base: Path) -> Iterator[Path]:
    claims = base / "runs/r1" / CLAIM_DIR
    claims.mkdir()
    (claims / claim_name(ME)).write_bytes(claim_body(ME))
    yield claims / claim_name(ME)


def batch(base: Path, names: list[str]) -> list[Any]:
    root = f"file://{base}/runs/r1"
    return remove_all([(f"{root}/{name}", root, ME) for name in names], {}, f"file://{base}")


def test_a_claim_rewritten_in_place_between_batches_is_read_as_it_is_now(base: Path, claimed: Path) -> None:
    """The claim file named for the run says another run once the first batch is done (an operator,
    another tool): the second batch refuses, the remembered reading of the first is not used."""
    for name in ("a", "b"):
        (base / "runs/r1" / name).mkdir()
        (base / "runs/r1" / name / "model.bin").write_bytes(b"m")
    assert batch(base, ["a"]) == [None] and not (base / "runs/r1/a").exists()
    claimed.write_bytes(claim_body(OTHER))
    before = tree(base)
    (outcome,) = batch(base, ["b"])
    assert isinstance(outcome, Refused) and "'b'" in outcome.reason and tree(base) == before
    claimed.write_bytes(claim_body(ME))
    assert batch(base, ["b"]) == [None] and not (base / "runs/r1/b").exists()


def test_a_claim_made_unreadable_between_batches_refuses(base: Path, claimed: Path) -> None:
    (base / "runs/r1/a").mkdir()
    assert batch(base, []) == []
    claimed.write_bytes(claim_body(ME)[:-5])  # truncated: names nobody
    before = tree(base)
    (outcome,) = batch(base, ["a"])
    assert isinstance(outcome, Refused) and tree(base) == before


def test_claimant_in_remembers_by_bytes_only_and_is_bounded() -> None:
    assert claimant_in(claim_body(ME)) == ME and claimant_in(claim_body(OTHER)) == OTHER
    assert claimant_in(claim_body(ME)[:-3]) == UNREADABLE
    assert claimant_in(b'{"run": "r1", "source": 3}') == UNREADABLE
    for at in range(3000):  # a flood of planted claims must not grow memory without bound
        assert claimant_in(claim_body(Claimant(f"r{at}", "t[0]"))) == Claimant(f"r{at}", "t[0]")
    info = _parsed.cache_info()
    assert info.maxsize == 1024 and info.currsize <= 1024
    assert claimant_in(claim_body(ME)) == ME  # evicted or not, the same answer
    assert claimant_in(bytearray(claim_body(OTHER))) == OTHER  # a storage's bytes-like is read too (unhashable)
    assert claimant_in(memoryview(claim_body(ME))) == ME


# -- `--storage-root` resolved once per batch (local_tree.LocalTree.batch, tree.remove_all) ------------------


def two_trees(tmp_path: Path) -> tuple[Path, Path, Path]:
    """`bound` a link to `a`; `a` and `b` alike: runs r1 and r2, each with checkpoints c0..c2."""
    for side in ("a", "b"):
        for run in ("r1", "r2"):
            for at in range(3):
                (tmp_path / side / run / f"c{at}").mkdir(parents=True)
                (tmp_path / side / run / f"c{at}" / "model.bin").write_bytes(side.encode())
    (tmp_path / "bound").symlink_to(tmp_path / "a", target_is_directory=True)
    return tmp_path / "bound", tmp_path / "a", tmp_path / "b"


def bound_batch(bound: Path, names: list[tuple[str, str]]) -> list[Any]:
    return remove_all(
        [(f"file://{bound}/{run}/{name}", f"file://{bound}/{run}", Claimant(run, "t[0]")) for run, name in names],
        {},
        f"file://{bound}",
    )


def test_a_bound_repointed_between_batches_is_resolved_again(tmp_path: Path) -> None:
    bound, a, b = two_trees(tmp_path)
    assert bound_batch(bound, [("r1", "c0"), ("r2", "c0")]) == [None, None]
    assert not (a / "r1/c0").exists() and not (a / "r2/c0").exists() and (b / "r1/c0").is_dir()
    (bound).unlink()
    bound.symlink_to(b, target_is_directory=True)
    before_a = tree(a)
    assert bound_batch(bound, [("r1", "c1"), ("r2", "c1")]) == [None, None]
    assert not (b / "r1/c1").exists() and not (b / "r2/c1").exists() and tree(a) == before_a


def test_a_bound_repointed_mid_batch_touches_nothing_in_the_new_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch walks below what the bound resolved to when it began; a link re-pointed between two
    of its roots leads none of its deletions into the new target."""
    bound, a, b = two_trees(tmp_path)
    real = local_tree._remove_seen

    def repointing(parent: int, seen: Any, url: str) -> None:
        monkeypatch.setattr(local_tree, "_remove_seen", real)
        bound.unlink()
        bound.symlink_to(b, target_is_directory=True)
        real(parent, seen, url)

    monkeypatch.setattr(local_tree, "_remove_seen", repointing)
    before_b = tree(b)
    outcomes = bound_batch(bound, [("r1", "c0"), ("r2", "c0"), ("r1", "c1")])
    assert outcomes == [None, None, None] and tree(b) == before_b
    assert not any((a / run / name).exists() for run, name in (("r1", "c0"), ("r2", "c0"), ("r1", "c1")))


def test_a_run_root_that_is_a_link_below_the_bound_is_refused_for_every_root_of_the_batch(tmp_path: Path) -> None:
    bound, a, b = two_trees(tmp_path)
    (a / "r3").symlink_to(b / "r1", target_is_directory=True)
    before = {k: v for k, v in tree(tmp_path).items() if not k.startswith("a/r1/c2")}
    root3 = f"file://{bound}/r3"
    items = [(f"{root3}/c{at}", root3, Claimant("r3", "t[0]")) for at in range(3)]
    items.insert(1, (f"file://{bound}/r1/c2", f"file://{bound}/r1", Claimant("r1", "t[0]")))
    outcomes = remove_all(items, {}, f"file://{bound}")
    assert outcomes[1] is None and not (a / "r1/c2").exists()
    for outcome in outcomes[:1] + outcomes[2:]:
        assert isinstance(outcome, Refused) and "symlink" in outcome.reason
    assert {k: v for k, v in tree(tmp_path).items() if not k.startswith("a/r1/c2")} == before


def test_without_a_bound_each_run_root_is_resolved_once_and_only_its_own_checkpoints_go(tmp_path: Path) -> None:
    _, a, b = two_trees(tmp_path)
    (tmp_path / "link-to-b-r1").symlink_to(b / "r1", target_is_directory=True)  # a root trusted without a bound
    roots = [(f"file://{a}/r1", "r1"), (f"file://{tmp_path}/link-to-b-r1", "r1b")]
    items = [(f"{root}/c{at}", root, Claimant(run, "t[0]")) for at in range(2) for root, run in roots]
    before_rest = {k: v for k, v in tree(tmp_path).items() if "/c2" in k or k.startswith(("a/r2", "b/r2"))}
    assert remove_all(items, {}) == [None] * 4
    assert not any((side / "r1" / f"c{at}").exists() for side in (a, b) for at in range(2))
    assert {k: v for k, v in tree(tmp_path).items() if "/c2" in k or k.startswith(("a/r2", "b/r2"))} == before_rest


def test_the_shared_local_tree_remembers_no_resolution(tmp_path: Path) -> None:
    """LOCAL_TREE (the root look, links.py; claims) resolves at every start; only a batch's tree remembers."""
    bound, _, b = two_trees(tmp_path)
    first = local_tree.LOCAL_TREE.start(f"file://{bound}", False, True)
    first.close()
    bound.unlink()
    bound.symlink_to(b, target_is_directory=True)
    again = local_tree.LOCAL_TREE.start(f"file://{bound}", False, True)
    try:
        assert os.fstat(again.fd).st_ino == os.stat(b).st_ino
    finally:
        again.close()


def test_others_is_the_sorted_foreign_claimants_as_before() -> None:
    from ckptlog.processor.storage.safety import _order, others

    pool = [ME, OTHER, Claimant("r1", None), Claimant("r1", "t[1]"), Claimant("r1", "t[0]", retired=True), UNREADABLE]
    for size in range(len(pool) + 1):
        for start in range(len(pool)):
            chosen = set((pool[start:] + pool[:start])[:size])
            for me in (ME, OTHER, None):
                expected = sorted((c for c in chosen if me is None or not me.owns(c)), key=_order)
                assert others(chosen or None, me) == expected
