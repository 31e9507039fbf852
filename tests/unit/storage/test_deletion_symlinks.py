"""Local deletion never follows a symlink (contract §9), tried on a real directory tree.

Each case builds `tmp/runs/r1` (the run root) beside `tmp/outside` (what an attacker would like
deleted), submits one eviction and checks, file by file, that nothing outside what was meant
to go changed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ckptlog.processor.storage import local_tree
from ckptlog.processor.storage.claim_writer import ClaimWriter
from ckptlog.processor.storage.deletion import Deleter, RetryPolicy
from ckptlog.processor.storage.safety import Refused
from ckptlog.processor.storage.tree import remove_all


def tree(base: Path) -> dict[str, bytes | str]:
    """Every entry below `base`, links as their target text (never followed), files by content."""
    found: dict[str, bytes | str] = {}
    for directory, dirs, files in os.walk(base, followlinks=False):
        for name in dirs + files:
            path = Path(directory) / name
            rel = str(path.relative_to(base))
            if path.is_symlink():
                found[rel] = f"-> {os.readlink(path)}"
            elif path.is_file():
                found[rel] = path.read_bytes()
            else:
                found[rel] = "dir"
    return found


async def delete(base: Path, rel: str) -> tuple[Deleter, list[tuple[tuple[str, str], str]]]:
    refused: list[tuple[tuple[str, str], str]] = []
    deleter = Deleter(retry=RetryPolicy(max_attempts=2, base_delay=0.001), on_refused=refused.extend)
    root = f"file://{base}/runs/r1"
    assert deleter.submit("r1", f"{root}/{rel}", root)
    await deleter.drain(timeout=10)
    return deleter, refused


@pytest.mark.parametrize("depth", [0, 1, 2])
async def test_a_symlinked_directory_inside_the_path_is_never_followed(base: Path, depth: int) -> None:
    """`runs/r1[/a/b]/link -> outside`; evicting `.../link/victim` once deleted `outside/victim`."""
    parent = base / "runs/r1" / "/".join(["a", "b"][:depth])
    parent.mkdir(parents=True, exist_ok=True)
    (parent / "link").symlink_to(base / "outside", target_is_directory=True)
    before = tree(base)
    rel = "/".join([*["a", "b"][:depth], "link", "victim"])
    deleter, refused = await delete(base, rel)
    assert tree(base) == before
    assert len(refused) == 1 and "'link'" in refused[0][1] and "symlink" in refused[0][1]
    assert deleter.outstanding == frozenset() and deleter.failed == {}


async def test_a_link_to_another_checkpoint_inside_the_root_is_not_followed_either(base: Path) -> None:
    (base / "runs/r1/alias").symlink_to(base / "runs/r1/kept", target_is_directory=True)
    before = tree(base)
    _, refused = await delete(base, "alias/model.bin")
    assert tree(base) == before and len(refused) == 1


@pytest.mark.parametrize("target", ["outside/victim", "outside/file.bin", "runs/r1/kept", "missing"])
async def test_a_checkpoint_that_is_a_symlink_is_unlinked_and_its_target_kept(base: Path, target: str) -> None:
    (base / "runs/r1/ckpt").symlink_to(base / target)
    before = tree(base)
    deleter, refused = await delete(base, "ckpt")
    after = tree(base)
    assert deleter.outstanding == frozenset()
    assert "runs/r1/ckpt" not in after and refused == []
    del before["runs/r1/ckpt"]
    assert after == before


async def test_a_real_tree_is_removed_without_following_links_inside_it(base: Path) -> None:
    ckpt = base / "runs/r1/ckpt"
    (ckpt / "sub").mkdir(parents=True)
    (ckpt / "sub/weights.bin").write_bytes(b"evicted")
    (ckpt / "sub/escape").symlink_to(base / "outside", target_is_directory=True)
    (ckpt / "to-file").symlink_to(base / "outside/file.bin")
    before = {k: v for k, v in tree(base).items() if not k.startswith("runs/r1/ckpt")}
    _, refused = await delete(base, "ckpt")
    assert tree(base) == before and refused == []


async def test_a_root_reached_through_a_link_is_resolved_once(base: Path) -> None:
    """The configured root may be a mount reached through a link; what lies below it is not trusted."""
    (base / "mount").symlink_to(base / "runs", target_is_directory=True)
    (base / "runs/r1/old").mkdir()
    refused: list[tuple[tuple[str, str], str]] = []
    deleter = Deleter(on_refused=refused.extend)
    assert deleter.submit("r1", f"file://{base}/mount/r1/old", f"file://{base}/mount/r1")
    assert await deleter.drain(timeout=10)
    assert not (base / "runs/r1/old").exists() and (base / "runs/r1/kept/model.bin").exists() and refused == []


def test_a_parent_that_is_a_file_or_a_missing_root_is_handled_per_path(base: Path) -> None:
    root = f"file://{base}/runs/r1"
    (base / "runs/r1/file.bin").write_bytes(b"1")
    outcomes = remove_all(
        [
            (f"{root}/file.bin/below", root, "r1"),
            (f"{root}/gone/below", root, "r1"),
            (f"file://{base}/nope/x", f"file://{base}/nope", "r2"),
        ],
        {},
    )
    assert isinstance(outcomes[0], Refused) and outcomes[1:] == [None, None]
    assert (base / "runs/r1/file.bin").read_bytes() == b"1"


def test_a_directory_swapped_for_a_link_after_the_walk_began_is_not_followed(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: `ckpt` is a real directory when its tree is checked, a link to `outside` when it
    is removed. The removal goes through what the check opened and removes the top by name
    (rmdir of a link: ENOTDIR), so the swap makes it fail (retried later) instead of deleting the target."""
    ckpt = base / "runs/r1/ckpt"
    ckpt.mkdir()
    real_remove = local_tree._remove_seen

    def swapping_remove(parent: int, seen: Any, url: str) -> None:
        ckpt.rmdir()
        ckpt.symlink_to(base / "outside", target_is_directory=True)
        real_remove(parent, seen, url)

    monkeypatch.setattr(local_tree, "_remove_seen", swapping_remove)
    before = {k: v for k, v in tree(base).items() if k != "runs/r1/ckpt"}
    outcome = remove_all([(f"file://{ckpt}", f"file://{base}/runs/r1", "r1")], {})[0]
    monkeypatch.undo()
    after = {k: v for k, v in tree(base).items() if k != "runs/r1/ckpt"}
    assert after == before and (base / "outside/victim/model.bin").read_bytes() == b"precious"
    assert ckpt.is_symlink(), "the swap happened"
    assert isinstance(outcome, str) and str(ckpt) in outcome  # not confirmed: a retry unlinks the link
    assert remove_all([(f"file://{ckpt}", f"file://{base}/runs/r1", "r1")], {}) == [None]
    assert not ckpt.is_symlink() and tree(base) == before


@pytest.mark.parametrize("via", ["link", "a/link"])
async def test_a_run_root_through_a_symlink_below_the_storage_root_is_never_left(base: Path, via: str) -> None:
    """Issue 20 #5: `S/link -> outside` and a run root `S/link/run`: the bound was compared on
    spellings and the run root resolved afterwards, so its evictions were deleted outside `S`."""
    (base / "outside/run/c1").mkdir(parents=True)
    (base / "outside/run/c1/model.bin").write_bytes(b"precious")
    link = base / "runs" / via
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(base / "outside", target_is_directory=True)
    before = tree(base)
    refused: list[tuple[tuple[str, str], str]] = []
    claims = ClaimWriter(outer_root=f"file://{base}/runs")
    deleter = Deleter(
        outer_root=f"file://{base}/runs", on_refused=refused.extend, retry=RetryPolicy(max_attempts=1), claims=claims
    )
    root = f"file://{base}/runs/{via}/run"
    assert deleter.submit("run", f"{root}/c1", root)  # its spelling lies below the bound: accepted
    claims.claim_many([(root, "run")])
    await deleter.drain(timeout=10)
    assert await claims.drain(timeout=10)
    assert tree(base) == before, "nothing outside the resolved bound changed: no deletion, no claim"
    assert len(refused) == 1 and "symlink" in refused[0][1] and "--storage-root" in refused[0][1]
    assert [(root_, claimant.run) for root_, claimant in claims.refused] == [(root, "run")]
    await deleter.close()
    await claims.close()


async def test_a_storage_root_that_is_itself_a_link_is_trusted(base: Path) -> None:
    """The configured bound may be a mount reached through a link: it is resolved once."""
    (base / "mnt").symlink_to(base / "runs", target_is_directory=True)
    (base / "runs/r1/old").mkdir()
    claims = ClaimWriter(outer_root=f"file://{base}/mnt")
    deleter = Deleter(outer_root=f"file://{base}/mnt", claims=claims)
    root = f"file://{base}/mnt/r1"
    claims.claim_many([(root, "r1")])
    assert await claims.drain(timeout=10) and not claims.refused
    assert deleter.submit("r1", f"{root}/old", root)
    assert await deleter.drain(timeout=10)
    assert not (base / "runs/r1/old").exists() and (base / "runs/r1/kept/model.bin").exists()
    assert (base / "runs/r1/.ckptlog-run").is_dir() and len(list((base / "runs/r1/.ckptlog-run").iterdir())) == 1
    await deleter.close()
    await claims.close()


async def test_a_claim_deep_inside_an_evicted_tree_keeps_the_whole_tree(base: Path) -> None:
    """Another partition's run rooted inside the evicted directory: nothing of it is removed."""
    (base / "runs/r1/big/x/y/other/kept").mkdir(parents=True)
    (base / "runs/r1/big/a.bin").write_bytes(b"1")
    (base / "runs/r1/big/x/y/other/kept/model.bin").write_bytes(b"other's")
    claims = ClaimWriter(outer_root=f"file://{base}/runs")
    deleter = Deleter(outer_root=f"file://{base}/runs", claims=claims)
    claims.claim_many([(f"file://{base}/runs/r1/big/x/y/other", "other")])
    assert await claims.drain(timeout=10)
    before = tree(base)
    root = f"file://{base}/runs/r1"
    assert deleter.submit("r1", f"{root}/big", root)
    await deleter.drain(timeout=10)
    assert tree(base) == before and "'other'" in deleter.refused[("r1", f"{root}/big")]
    await deleter.close()
    await claims.close()
