"""The one walk per deleted local checkpoint (local_tree.py `remove_checked`, contract §9), attacked
on a real directory tree: the whole tree is checked before anything goes, exactly what the check
saw is removed, nothing is followed through a link and nothing outside the checkpoint changes.

Each case builds `tmp/runs/r1` (the run root) beside `tmp/outside` (what an attacker would like
deleted) and compares every entry below `tmp`, links by target text, files by content.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlog.events.paths import CLAIM_DIR
from ckptlog.processor.storage import local_tree
from ckptlog.processor.storage.claims import Claimant, claim_body, claim_name
from ckptlog.processor.storage.local_tree import MAX_TREE_DEPTH
from ckptlog.processor.storage.safety import Outcome, Refused
from ckptlog.processor.storage.tree import remove_all

from .test_deletion_symlinks import tree

ME, OTHER = Claimant("r1", "t[0]"), Claimant("b", "t[1]")
NOBODY = 65534


def remove(base: Path, rel: str = "ckpt") -> Outcome:
    (outcome,) = remove_all([(f"file://{base}/runs/r1/{rel}", f"file://{base}/runs/r1", ME)], {})
    return outcome


def without(found: dict[str, bytes | str], rel: str) -> dict[str, bytes | str]:
    return {k: v for k, v in found.items() if k != rel and not k.startswith(rel + "/")}


def claim(directory: Path, who: Claimant) -> None:
    (directory / CLAIM_DIR).mkdir(parents=True, exist_ok=True)
    (directory / CLAIM_DIR / claim_name(who)).write_bytes(claim_body(who))


def nested(top: Path, depth: int) -> list[Path]:
    """`top/d1/d2/...` (`depth` directories, top included), a file in each; the directories."""
    dirs = [top]
    for level in range(1, depth):
        dirs.append(dirs[-1] / f"d{level}")
    dirs[-1].mkdir(parents=True)
    for at, directory in enumerate(dirs):
        (directory / "part.bin").write_bytes(str(at).encode())
    return dirs


@pytest.fixture
def between(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[], None]], None]]:
    """Run an action once, after the walk's scan and before its removal."""

    def arm(action: Callable[[], None]) -> None:
        real = local_tree._remove_seen

        def hooked(parent: int, seen: Any, url: str) -> None:
            monkeypatch.setattr(local_tree, "_remove_seen", real)
            action()
            real(parent, seen, url)

        monkeypatch.setattr(local_tree, "_remove_seen", hooked)

    yield arm


@pytest.mark.parametrize("depth", [2, 4, 9])
def test_another_runs_claim_deep_inside_keeps_every_entry(base: Path, depth: int) -> None:
    dirs = nested(base / "runs/r1/ckpt", depth)
    claim(dirs[-1], OTHER)
    before = tree(base)
    outcome = remove(base)
    assert isinstance(outcome, Refused) and not outcome.retry and "'b'" in outcome.reason
    assert tree(base) == before


def test_my_own_claim_inside_is_removed_with_the_tree(base: Path) -> None:
    dirs = nested(base / "runs/r1/ckpt", 3)
    claim(dirs[1], ME)
    before = tree(base)
    assert remove(base) is None
    assert tree(base) == without(before, "runs/r1/ckpt")


def test_a_claim_directory_that_is_a_link_inside_is_refused(base: Path) -> None:
    dirs = nested(base / "runs/r1/ckpt", 2)
    (dirs[1] / CLAIM_DIR).symlink_to(base / "outside", target_is_directory=True)
    before = tree(base)
    assert isinstance(remove(base), Refused) and tree(base) == before


def test_a_link_at_every_depth_is_unlinked_never_followed(base: Path) -> None:
    dirs = nested(base / "runs/r1/ckpt", 5)
    for at, directory in enumerate(dirs):
        (directory / "to-dir").symlink_to(base / "outside/victim", target_is_directory=True)
        (directory / "to-file").symlink_to(base / "outside/file.bin")
        (directory / "dangling").symlink_to(base / "nowhere" / str(at))
        (directory / "to-kept").symlink_to(base / "runs/r1/kept")
    before = tree(base)
    assert remove(base) is None
    assert tree(base) == without(before, "runs/r1/ckpt")


@pytest.mark.parametrize("target", ["outside/victim", "outside/file.bin", "runs/r1/kept"])
def test_a_checkpoint_that_is_a_link_is_unlinked(base: Path, target: str) -> None:
    (base / "runs/r1/ckpt").symlink_to(base / target)
    before = tree(base)
    assert remove(base) is None and tree(base) == without(before, "runs/r1/ckpt")


def test_a_checkpoint_already_gone_counts_as_deleted(base: Path) -> None:
    before = tree(base)
    assert remove(base) is None and tree(base) == before


@pytest.mark.parametrize("level", [1, 2])
def test_a_directory_swapped_for_a_link_between_scan_and_removal_fails_and_the_retry_unlinks_it(
    base: Path, between: Callable[[Callable[[], None]], None], level: int
) -> None:
    dirs = nested(base / "runs/r1/ckpt", 4)
    swapped = dirs[level]

    def swap() -> None:
        for entry in sorted(swapped.rglob("*"), reverse=True):
            entry.rmdir() if entry.is_dir() else entry.unlink()
        swapped.rmdir()
        swapped.symlink_to(base / "outside/victim", target_is_directory=True)

    between(swap)
    outside = {k: v for k, v in tree(base).items() if k.startswith("outside")}
    outcome = remove(base)
    assert isinstance(outcome, str) and str(swapped.relative_to(base / "runs/r1")) in outcome
    assert swapped.is_symlink() and {k: v for k, v in tree(base).items() if k.startswith("outside")} == outside
    assert remove(base) is None  # the retry sees a link there now: unlinked, not followed
    assert not (base / "runs/r1/ckpt").exists() and (base / "outside/victim/model.bin").read_bytes() == b"precious"


def test_wide_trees_beyond_the_held_descriptors_are_reopened_without_following_a_swapped_link(
    base: Path, between: Callable[[Callable[[], None]], None]
) -> None:
    """More subdirectories than the walk holds open: some are reopened by name to be removed;
    every one swapped for a link is refused by ELOOP or ENOTDIR, never followed."""
    ckpt = base / "runs/r1/ckpt"
    shards = [ckpt / f"shard-{i:02d}" for i in range(3 * local_tree._Scan.HOLD)]
    for shard in shards:
        shard.mkdir(parents=True)

    reopened = [ckpt / name for name in os.listdir(ckpt)][local_tree._Scan.HOLD :]  # the scan's order

    def swap() -> None:
        for shard in reopened:
            shard.rmdir()
            shard.symlink_to(base / "outside/victim", target_is_directory=True)

    between(swap)
    before = tree(base)
    outcome = remove(base)
    assert isinstance(outcome, str) and ("symbolic links" in outcome or "Not a directory" in outcome)
    assert any(f"ckpt/{shard.name} " in outcome for shard in reopened)  # failed reopening it, O_NOFOLLOW
    assert all(shard.is_symlink() for shard in reopened) and without(tree(base), "runs") == without(before, "runs")
    assert remove(base) is None and tree(base) == without(before, "runs/r1/ckpt")


def test_a_reopened_directory_replaced_by_another_runs_root_loses_nothing(
    base: Path, between: Callable[[Callable[[], None]], None]
) -> None:
    """A directory the walk closed (beyond its held descriptors) and renamed away, another run's
    root holding a file of the same name renamed into its place: the walk reopens a different
    directory, sees it is not the one it checked, and removes nothing in it."""
    ckpt = base / "runs/r1/ckpt"
    shards = [ckpt / f"shard-{i:02d}" for i in range(2 * local_tree._Scan.HOLD)]
    for shard in shards:
        shard.mkdir(parents=True)
        (shard / "model.bin").write_bytes(b"mine")
    reopened = [ckpt / name for name in os.listdir(ckpt)][local_tree._Scan.HOLD :]
    planted = base / "outside/b-root"

    def swap() -> None:
        for at, shard in enumerate(reopened):
            shard.rename(base / "outside" / f"moved-{at}")
            (planted / str(at)).mkdir(parents=True)
            claim(planted / str(at), OTHER)
            (planted / str(at) / "model.bin").write_bytes(b"b's")
            (planted / str(at)).rename(shard)

    between(swap)
    outcome = remove(base)
    assert isinstance(outcome, str) and "replaced by another directory" in outcome
    for shard in reopened:
        assert (shard / "model.bin").read_bytes() == b"b's" and (shard / CLAIM_DIR).is_dir()
    again = remove(base)
    assert isinstance(again, Refused) and "'b'" in again.reason


def test_an_entry_added_after_the_scan_is_left_and_the_path_retried(
    base: Path, between: Callable[[Callable[[], None]], None]
) -> None:
    dirs = nested(base / "runs/r1/ckpt", 3)
    between(lambda: (dirs[1] / "late.bin").write_bytes(b"new"))
    outcome = remove(base)
    assert isinstance(outcome, str) and "appeared after" in outcome and "ckpt/d1" in outcome
    assert (dirs[1] / "late.bin").read_bytes() == b"new"
    assert not (dirs[2]).exists() and not (dirs[1] / "part.bin").exists()  # what was seen below went
    outside = {k: v for k, v in tree(base).items() if not k.startswith("runs/r1/ckpt")}
    assert remove(base) is None and tree(base) == outside


def test_a_directory_added_after_the_scan_is_left_too(
    base: Path, between: Callable[[Callable[[], None]], None]
) -> None:
    dirs = nested(base / "runs/r1/ckpt", 2)
    between(lambda: claim(dirs[1] / "b-root", OTHER))
    assert isinstance(remove(base), str)
    assert (dirs[1] / "b-root" / CLAIM_DIR / claim_name(OTHER)).read_bytes() == claim_body(OTHER)
    outcome = remove(base)  # checked again: now another run's claim is inside
    assert isinstance(outcome, Refused) and "'b'" in outcome.reason


def test_a_fifo_inside_or_as_the_checkpoint_is_unlinked_without_blocking(base: Path) -> None:
    dirs = nested(base / "runs/r1/ckpt", 2)
    os.mkfifo(dirs[1] / "pipe")
    os.mkfifo(base / "runs/r1/pipe-ckpt")
    outcomes: list[Outcome] = []

    def run() -> None:
        outcomes.append(remove(base))
        outcomes.append(remove(base, "pipe-ckpt"))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert outcomes == [None, None], "the walk blocked on a FIFO"
    assert not (base / "runs/r1/ckpt").exists() and not (base / "runs/r1/pipe-ckpt").exists()


@pytest.mark.parametrize(("depth", "removed"), [(MAX_TREE_DEPTH, True), (MAX_TREE_DEPTH + 1, False)])
def test_a_tree_deeper_than_the_bound_is_refused_whole(base: Path, depth: int, removed: bool) -> None:
    nested(base / "runs/r1/ckpt", depth)
    before = tree(base)
    outcome = remove(base)
    if removed:
        assert outcome is None and tree(base) == without(before, "runs/r1/ckpt")
    else:
        assert isinstance(outcome, Refused) and "too deep" in outcome.reason and tree(base) == before


HOSTILE = ["a\nb", "..a", "...", "-rf", " ", "é\u0301", "\u202eevil", "x" * 255, "\\", "*", ".ckptlog-runx"]


def test_hostile_names_inside_are_removed_and_nothing_else(base: Path) -> None:
    ckpt = base / "runs/r1/ckpt"
    for name in HOSTILE:
        (ckpt / name / name).mkdir(parents=True)
        (ckpt / name / name / name).write_bytes(b"x")
        (ckpt / f"f{name}"[:255]).write_bytes(b"y")
    os.makedirs(os.fsencode(ckpt) + b"/\xff\xfe")  # not UTF-8
    before = tree(base)
    assert remove(base) is None and tree(base) == without(before, "runs/r1/ckpt")


@pytest.mark.parametrize("name", ["a\nb", "...", "é", "x" * 255])
def test_a_checkpoint_with_a_hostile_name_is_removed(base: Path, name: str) -> None:
    nested(base / "runs/r1" / name, 3)
    before = tree(base)
    assert remove(base, name) is None and tree(base) == without(before, f"runs/r1/{name}")


def as_nobody(base: Path) -> Outcome:
    """`remove_all` of `runs/r1/ckpt` in a process that does not bypass permissions (uid 0 does)."""
    if os.geteuid() != 0:
        return remove(base)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            out = remove(base)
            os.write(write, json.dumps(out if not isinstance(out, Refused) else ["refused", out.reason]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as got:
        body = got.read()
    os.waitpid(pid, 0)
    decoded = json.loads(body)
    return Refused(decoded[1]) if isinstance(decoded, list) else decoded  # type: ignore[no-any-return]


def _searchable_by_all() -> str:
    """A temporary directory every user can reach: $TMPDIR may be private (.ci/run's is, mode 0700)."""
    for candidate in (tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"):
        path = Path(candidate).resolve()
        if path.is_dir() and all(p.stat().st_mode & 0o001 for p in (path, *path.parents)):
            return str(path)
    raise AssertionError("no temporary directory every user can search; set TMPDIR to one")


@pytest.fixture
def shared_base() -> Iterator[Path]:
    """`base` in a directory the unprivileged child can reach (pytest's own is root's, mode 0700)."""
    with tempfile.TemporaryDirectory(prefix="ckptlog-walk-", dir=_searchable_by_all()) as tmp:
        made = Path(tmp)
        made.chmod(0o755)
        (made / "outside/victim").mkdir(parents=True)
        (made / "outside/victim/model.bin").write_bytes(b"precious")
        (made / "runs/r1").mkdir(parents=True)
        yield made
        for directory, _, _ in os.walk(made):
            os.chmod(directory, 0o755)


def _owned_by_nobody(top: Path) -> None:
    if os.geteuid() == 0:
        for directory, dirs, files in os.walk(top):
            for name in [directory, *(os.path.join(directory, n) for n in dirs + files)]:
                os.lchown(name, NOBODY, NOBODY)


@pytest.mark.parametrize(("mode", "scanned"), [(0o000, False), (0o100, False), (0o500, True)])
def test_permission_denied_below_fails_retried_and_touches_nothing_outside(
    shared_base: Path, mode: int, scanned: bool
) -> None:
    """Unreadable (0o000, 0o100): the scan fails, nothing is removed. Readable but not writable
    (0o500): the scan passes, removing inside it fails; what is in it stays."""
    base = shared_base
    dirs = nested(base / "runs/r1/ckpt", 4)
    (dirs[2] / "to-victim").symlink_to(base / "outside/victim", target_is_directory=True)
    _owned_by_nobody(base / "runs")
    dirs[2].chmod(mode)
    before = tree(base)
    outcome = as_nobody(base)
    dirs[2].chmod(0o755)
    assert isinstance(outcome, str) and "ckpt/d1/d2" in outcome and "ermission denied" in outcome
    after = tree(base)
    assert {k: v for k, v in after.items() if not k.startswith("runs/")} == {
        k: v for k, v in before.items() if not k.startswith("runs/")
    }
    if scanned:  # the top's own file went first; everything in the locked directory stayed
        assert (dirs[2] / "part.bin").exists() and (dirs[2] / "to-victim").is_symlink()
    else:
        assert after == before
    assert as_nobody(base) is None and not (base / "runs/r1/ckpt").exists()
    assert (base / "outside/victim/model.bin").read_bytes() == b"precious"


ENTRIES = st.sampled_from(["file", "dir", "link-out", "link-in", "fifo", "foreign-claim", "own-claim"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.tuples(st.integers(0, 5), ENTRIES), min_size=1, max_size=25))
def test_a_random_tree_is_removed_whole_or_left_whole(tmp_path_factory: pytest.TempPathFactory, plan: Any) -> None:
    """Any tree of files, directories, links (out of and into the root), FIFOs and claims: with
    another run's claim anywhere in it nothing changes, without one it is gone; outside, nothing changes."""
    base = tmp_path_factory.mktemp("walk")
    (base / "outside/victim").mkdir(parents=True)
    (base / "outside/victim/model.bin").write_bytes(b"precious")
    (base / "runs/r1/kept").mkdir(parents=True)
    dirs = [base / "runs/r1/ckpt"]
    dirs[0].mkdir()
    for at, (where, kind) in enumerate(plan):
        parent = dirs[where % len(dirs)]
        entry = parent / f"e{at}"
        if kind == "dir":
            entry.mkdir()
            dirs.append(entry)
        elif kind == "file":
            entry.write_bytes(b"x")
        elif kind == "fifo":
            os.mkfifo(entry)
        elif kind.startswith("link"):
            entry.symlink_to(base / ("outside/victim" if kind == "link-out" else "runs/r1/kept"))
        else:
            claim(parent, OTHER if kind == "foreign-claim" else ME)
    foreign = any(kind == "foreign-claim" for _, kind in plan)
    before = tree(base)
    outcome = remove(base)
    if foreign:
        assert isinstance(outcome, Refused) and tree(base) == before
    else:
        assert outcome is None and tree(base) == without(before, "runs/r1/ckpt")
