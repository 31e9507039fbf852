"""Attacks on the one walk per deleted local checkpoint (local_tree.py, contract §9) by a careless or
hostile operator who moves directories while the deleter walks: a directory the scan saw inside the
checkpoint and then moved outside the run's root is outside it, and nothing there may be touched.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ckptlog.events.envelope import deletion_completed_data, encode_json
from ckptlog.events.paths import CLAIM_DIR
from ckptlog.processor.storage import local_tree
from ckptlog.processor.storage.claims import Claimant, claim_body, claim_name
from ckptlog.processor.storage.deletion import Deleter, RetryPolicy
from ckptlog.processor.storage.safety import Refused
from ckptlog.processor.storage.tree import remove_all as local_remove_all

from .test_deletion_symlinks import tree
from .test_local_walk import between, nested, remove

__all__ = ["between"]

ME, OTHER = Claimant("r1", "t[0]"), Claimant("b", "t[1]")


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


@pytest.mark.parametrize("claim_name_bytes", [None, b"\xff\xfe-claim"])
def test_a_refusal_naming_a_non_utf8_directory_can_be_written_back_as_a_completion(
    base: Path, claim_name_bytes: bytes | None
) -> None:
    """The reason travels in the run's `deletion_completed` (records.py): it must be UTF-8 JSON, or
    the refusal never reaches the run's state (owed forever, a logged exception each time)."""
    ckpt = base / "runs/r1/ckpt"
    hostile = os.path.join(os.fsencode(ckpt), b"shard-\xff\xfe")
    claims = os.path.join(hostile, os.fsencode(CLAIM_DIR))
    os.makedirs(claims)
    name = claim_name_bytes or os.fsencode(claim_name(OTHER))
    with open(os.path.join(claims, name), "wb") as out:
        out.write(claim_body(OTHER))
    outcome = remove(base)
    assert isinstance(outcome, Refused) and "shard-" in outcome.reason
    encoded = encode_json(deletion_completed_data((), [(f"file://{ckpt}", 1, outcome.reason)]))
    assert b"shard-\\\\xff\\\\xfe" in encoded and os.path.exists(claims)  # spelled escaped; nothing removed


def test_a_hard_link_to_a_file_outside_loses_only_its_name_inside(base: Path) -> None:
    ckpt = base / "runs/r1/ckpt/deep/er"
    ckpt.mkdir(parents=True)
    os.link(base / "outside/file.bin", ckpt / "model.bin")
    os.link(base / "outside/victim/model.bin", base / "runs/r1/ckpt/top.bin")
    before = outside_of(base)
    assert remove(base) is None and not (base / "runs/r1/ckpt").exists()
    assert outside_of(base) == before and (base / "outside/file.bin").stat().st_nlink == 1


@pytest.mark.parametrize("rel", ["", ".", "ckpt/..", "./", "..", "../r1", "kept/../..", "/", "//"])
def test_a_checkpoint_spelled_as_the_run_root_or_above_is_refused_and_nothing_goes(base: Path, rel: str) -> None:
    (base / "runs/r1/ckpt").mkdir()
    before = tree(base)
    url = f"file://{base}/runs/r1" + (f"/{rel}" if rel else "")
    (outcome,) = local_remove_all([(url, f"file://{base}/runs/r1", ME)], {})
    assert outcome is not None and tree(base) == before


@pytest.mark.parametrize("held", [True, False])
def test_a_claim_written_after_the_scan_keeps_its_directory_and_the_retry_refuses(
    base: Path, between: Callable[[Callable[[], None]], None], held: bool
) -> None:
    ckpt = base / "runs/r1/ckpt"
    shards = [ckpt / f"shard-{i:02d}" for i in range(2 * local_tree._Scan.HOLD)]
    for shard in shards:
        shard.mkdir(parents=True)
        (shard / "part.bin").write_bytes(b"x")
    order = [ckpt / name for name in os.listdir(ckpt)]
    target = order[0] if held else order[-1]

    def claim_it() -> None:
        (target / CLAIM_DIR).mkdir()
        (target / CLAIM_DIR / claim_name(OTHER)).write_bytes(claim_body(OTHER))

    between(claim_it)
    assert isinstance(remove(base), str)
    assert (target / CLAIM_DIR / claim_name(OTHER)).exists()
    assert isinstance(remove(base), Refused) and (target / CLAIM_DIR / claim_name(OTHER)).exists()


def test_a_crash_mid_removal_leaves_the_path_outstanding_and_the_retry_finishes_it(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = nested(base / "runs/r1/ckpt", 5)
    real, calls = os.rmdir, []

    def crashing(path: str, *, dir_fd: int | None = None) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(5, "Input/output error")  # the process dies here: half the tree is gone
        real(path, dir_fd=dir_fd)

    monkeypatch.setattr(local_tree.os, "rmdir", crashing)
    before = outside_of(base)
    outcome = remove(base)
    assert isinstance(outcome, str) and dirs[0].exists() and not dirs[4].exists()
    monkeypatch.setattr(local_tree.os, "rmdir", real)
    assert remove(base) is None and not dirs[0].exists() and outside_of(base) == before
    assert (base / "runs/r1/kept/model.bin").read_bytes() == b"kept"


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("fails", [False, True])
def test_a_wide_and_deep_tree_goes_whole_and_no_descriptor_leaks(
    base: Path, between: Callable[[Callable[[], None]], None], fails: bool
) -> None:
    """> 1000 entries, > HOLD directories, > 8 levels; a late entry deep down fails it (retried)."""
    ckpt = base / "runs/r1/ckpt"
    dirs = nested(ckpt / "chain", 3 * local_tree._Scan.HOLD)
    for at in range(40):
        shard = ckpt / f"shard-{at:02d}"
        shard.mkdir()
        for part in range(30):
            (shard / f"p{part}").write_bytes(b"x")
    if fails:
        between(lambda: (dirs[-1] / "late.bin").write_bytes(b"late"))
    before, outside = open_fds(), outside_of(base)
    outcome = remove(base)
    assert open_fds() == before and outside_of(base) == outside
    if fails:
        assert isinstance(outcome, str) and (dirs[-1] / "late.bin").exists()
        assert remove(base) is None
    assert outcome is None or fails
    assert not ckpt.exists() and (base / "runs/r1/kept/model.bin").read_bytes() == b"kept"


async def test_a_writer_that_never_stops_keeps_the_deletion_failing_reported_and_outstanding(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job still writing into an evicted checkpoint: every attempt meets an entry its scan did
    not see (ENOTEMPTY); each is retried with backoff, then the path waits in `failed`, outstanding
    and named, never confirmed and never dropped; once the writer stops, a retry removes it."""
    ckpt = base / "runs/r1/ckpt"
    ckpt.mkdir()
    (ckpt / "part.bin").write_bytes(b"x")
    real, writes = local_tree._remove_seen, [0]

    def writer_then_remove(parent: int, seen: Any, url: str) -> None:
        writes[0] += 1
        (ckpt / f"late-{writes[0]}.bin").write_bytes(b"late")
        real(parent, seen, url)

    monkeypatch.setattr(local_tree, "_remove_seen", writer_then_remove)
    done: list[tuple[str, str]] = []
    deleter = Deleter(retry=RetryPolicy(max_attempts=3, base_delay=0.01), on_done=done.extend)
    key = ("r1", f"file://{ckpt}")
    assert deleter.submit(*key, f"file://{base}/runs/r1")
    assert not await deleter.drain(timeout=10)
    assert writes[0] == 3 and deleter.outstanding == set(deleter.failed) == {key} and done == []
    assert "appeared after its tree was checked" in deleter.failed[key] and ckpt.exists()
    monkeypatch.setattr(local_tree, "_remove_seen", real)
    assert deleter.retry_failed() == 1 and await deleter.drain(timeout=10)
    assert done == [key] and not ckpt.exists() and deleter.outstanding == frozenset()
    await deleter.close()
