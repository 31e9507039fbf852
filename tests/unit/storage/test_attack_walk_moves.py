"""Attacks on the one walk per deleted local checkpoint (local_tree.py, contract §9) by a careless or
hostile operator who moves directories while the deleter walks: a directory the scan saw inside the
checkpoint and then moved outside the run's root is outside it, and nothing there may be touched.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ckptlog.processor.storage import local_tree

from .test_deletion_symlinks import tree
from .test_local_walk import base, between, nested, remove

__all__ = ["base", "between"]


def outside_of(base: Path) -> dict[str, bytes | str]:
    return {k: v for k, v in tree(base).items() if k.startswith("outside")}


@pytest.mark.parametrize("level", [0, 1, 3])
def test_a_directory_moved_outside_the_run_root_after_the_scan_keeps_every_entry(
    base: Path, between: Callable[[Callable[[], None]], None], level: int
) -> None:
    dirs = nested(base / "runs/r1/ckpt", 4)
    moved = base / "outside/moved"
    between(lambda: dirs[level].rename(moved))
    remove(base)
    assert (moved / "part.bin").read_bytes() == str(level).encode()  # outside the root: untouched
    assert sorted(p.name for p in moved.rglob("*")) == sorted(
        ["part.bin"] + [f"d{n}" for n in range(level + 1, 4)] + ["part.bin"] * (3 - level)
    )


def test_a_moved_out_directory_beyond_the_held_descriptors_keeps_every_entry_too(
    base: Path, between: Callable[[Callable[[], None]], None]
) -> None:
    ckpt = base / "runs/r1/ckpt"
    for i in range(2 * local_tree._Scan.HOLD):
        (ckpt / f"shard-{i:02d}").mkdir(parents=True)
        (ckpt / f"shard-{i:02d}/part.bin").write_bytes(b"x")
    names = os.listdir(ckpt)

    def move_all() -> None:
        for at, name in enumerate(names):
            (ckpt / name).rename(base / f"outside/moved-{at:02d}")

    between(move_all)
    before = outside_of(base)
    assert remove(base) is None  # the checkpoint itself is gone (emptied by the moves)
    moved = {f"outside/moved-{at:02d}": "dir" for at in range(len(names))}
    moved |= {f"outside/moved-{at:02d}/part.bin": b"x" for at in range(len(names))}
    assert outside_of(base) == before | moved and not ckpt.exists()


def test_a_moved_out_directory_replaced_by_a_same_named_one_inside_removes_only_the_new_seen_names(
    base: Path, between: Callable[[Callable[[], None]], None]
) -> None:
    """The replacement is inside the checkpoint (it may go); the moved one is outside (it stays)."""
    dirs = nested(base / "runs/r1/ckpt", 3)
    moved = base / "outside/moved"

    def swap() -> None:
        dirs[1].rename(moved)
        dirs[1].mkdir()
        (dirs[1] / "part.bin").write_bytes(b"new")

    between(swap)
    first = remove(base)
    assert isinstance(first, str)  # ckpt/d1 is not the directory the scan checked: retried
    assert (moved / "part.bin").read_bytes() == b"1" and (moved / "d2/part.bin").read_bytes() == b"2"
    assert remove(base) is None and not (base / "runs/r1/ckpt").exists()
    assert (moved / "part.bin").read_bytes() == b"1"
