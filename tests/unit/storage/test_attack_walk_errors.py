"""Attack on the deleter's walk after it dropped its context managers (tree.py `_remove_one`: try/except
and `objects.mapped_error` instead of `mapped_errors`; local_tree.py `_remove_seen`: try/except instead
of `suppress`): every way a path's removal can fail still gives the outcome it gave before (the same
cases pass on 0d45ccd's tree, run with PYTHONPATH at its `git archive`), the next path of the batch is
still deleted, and no outcome leaves a reference cycle (test_walk_garbage.py).

Real trees; a failure the kernel will not give a root-run test (EACCES, EBUSY, ESTALE) is injected into
local_tree's `os` at the one call, the rest of the walk real.
"""

from __future__ import annotations

import errno
import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ckptlog.processor.storage import local_tree
from ckptlog.processor.storage.claims import Claimant
from ckptlog.processor.storage.safety import Refused
from ckptlog.processor.storage.tree import remove_all

ME = Claimant("r", "t[0]")


@pytest.fixture
def no_automatic_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _failing(monkeypatch: pytest.MonkeyPatch, call: str, name: str | None, exc: Callable[[], BaseException]) -> None:
    """local_tree's `os.<call>` raises `exc()` for an entry named `name` (None: its first call); every other
    call is the real one. A new exception each time: one kept by this closure would make a cycle of its own
    (its traceback holds the frame that holds the closure)."""
    real, calls = getattr(os, call), []

    def faulty(*args: Any, **kwargs: Any) -> Any:
        calls.append(None)
        if (args and args[0] == name) or (name is None and len(calls) == 1):
            raise exc()
        return real(*args, **kwargs)

    namespace = SimpleNamespace(**{n: getattr(os, n) for n in dir(os) if not n.startswith("__")})
    setattr(namespace, call, faulty)
    monkeypatch.setattr(local_tree, "os", namespace)


def _checkpoint(root: Path, name: str) -> None:
    (root / name / "sub").mkdir(parents=True)
    (root / name / "sub" / f"w-{name}.bin").write_bytes(b"w")


Case = Callable[[Path, pytest.MonkeyPatch], None]


def _denied_unlink(root: Path, patch: pytest.MonkeyPatch) -> None:
    _failing(patch, "unlink", "w-a.bin", lambda: PermissionError(errno.EACCES, "Permission denied"))


def _busy_rmdir(root: Path, patch: pytest.MonkeyPatch) -> None:
    _failing(patch, "rmdir", "a", lambda: OSError(errno.EBUSY, "Device or resource busy"))


def _stale_stat(root: Path, patch: pytest.MonkeyPatch) -> None:
    _failing(patch, "stat", "a", lambda: OSError(errno.ESTALE, "Stale file handle"))


def _a_bug_in_the_walk(root: Path, patch: pytest.MonkeyPatch) -> None:
    _failing(patch, "rmdir", "a", lambda: RuntimeError("a bug"))


def _vanished_mid_walk(root: Path, patch: pytest.MonkeyPatch) -> None:
    _failing(patch, "scandir", None, lambda: FileNotFoundError(errno.ENOENT, "No such file or directory"))


def _a_file_where_the_checkpoint_was(root: Path, patch: pytest.MonkeyPatch) -> None:
    for path in (root / "a").rglob("*"):
        if path.is_file():
            path.unlink()
    (root / "a" / "sub").rmdir()
    (root / "a").rmdir()
    (root / "a").write_bytes(b"a file")


def _a_link_where_the_checkpoint_was(root: Path, patch: pytest.MonkeyPatch) -> None:
    outside = root.parent / "outside"
    _checkpoint(outside, "kept")
    _a_file_where_the_checkpoint_was(root, patch)
    (root / "a").unlink()
    (root / "a").symlink_to(outside / "kept", target_is_directory=True)


def _a_file_above_the_checkpoint(root: Path, patch: pytest.MonkeyPatch) -> None:
    """The url is root/a/sub: its parent `a` swapped for a file (ENOTDIR as the walk opens it)."""
    _a_file_where_the_checkpoint_was(root, patch)


def _a_link_above_the_checkpoint(root: Path, patch: pytest.MonkeyPatch) -> None:
    """The url is root/a/sub: its parent `a` swapped for a link to a tree outside (ELOOP)."""
    _a_link_where_the_checkpoint_was(root, patch)


def _a_link_swapped_in_below(root: Path, patch: pytest.MonkeyPatch) -> None:
    """A directory inside the checkpoint is a link to a tree outside: unlinked, never followed."""
    outside = root.parent / "outside"
    _checkpoint(outside, "kept")
    (root / "a" / "sub" / "link").symlink_to(outside / "kept", target_is_directory=True)


CASES: dict[str, tuple[Case, str, Any]] = {
    # case: (build, the path deleted (below the root), expected outcome: None, Refused, or an error text's start)
    "EACCES unlinking a file inside": (_denied_unlink, "a", "could not delete a/sub of {url}: Permission denied"),
    "EBUSY removing the checkpoint": (_busy_rmdir, "a", "could not delete a of {url}: Device or resource busy"),
    "ESTALE checking it is still there": (_stale_stat, "a", "could not delete a of {url}: Stale file handle"),
    "a bug (RuntimeError) in the walk": (_a_bug_in_the_walk, "a", "RuntimeError: a bug"),
    "ENOENT listing it (a raw FileNotFoundError)": (_vanished_mid_walk, "a", "could not delete {url}: it does not"),
    "a file where the checkpoint was": (_a_file_where_the_checkpoint_was, "a", None),
    "a link where the checkpoint was": (_a_link_where_the_checkpoint_was, "a", None),
    "ENOTDIR: a file above the checkpoint": (_a_file_above_the_checkpoint, "a/sub", Refused),
    "ELOOP: a link above the checkpoint": (_a_link_above_the_checkpoint, "a/sub", Refused),
    "a link inside the checkpoint": (_a_link_swapped_in_below, "a", None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_failure_of_a_path_gives_its_outcome_and_the_batch_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, no_automatic_gc: None
) -> None:
    build, below, expected = CASES[case]
    root = tmp_path / "runs" / "r"
    for name in ("a", "b"):
        _checkpoint(root, name)
    build(root, monkeypatch)
    gc.collect()  # the test's own garbage (pathlib's globbing), not the walk's
    base = root.as_uri()
    url = f"{base}/{below}"
    outcomes = remove_all([(url, base, ME), (f"{base}/b", base, ME)], {})
    monkeypatch.undo()
    first, second = outcomes
    if expected is None or expected is Refused:
        assert (first is None) if expected is None else isinstance(first, Refused), (case, first)
    else:
        assert isinstance(first, str) and first.startswith(expected.format(url=url)), (case, first)
    assert second is None and not (root / "b").exists(), (case, second)
    assert root.is_dir() and (tmp_path / "runs").is_dir()
    outside = tmp_path / "runs" / "outside" / "kept" / "sub" / "w-kept.bin"
    assert not (tmp_path / "runs" / "outside").exists() or outside.exists(), f"{case}: a link was followed"
    del outcomes, first, second
    assert gc.collect() == 0, f"{case}: the walk left objects that only the cyclic collector frees"


def test_an_interrupt_in_the_walk_is_not_swallowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A BaseException (KeyboardInterrupt, a failpoint's crash) goes through, as under the context manager."""
    root = tmp_path / "r"
    _checkpoint(root, "a")
    _failing(monkeypatch, "rmdir", "a", lambda: KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        remove_all([(f"{root.as_uri()}/a", root.as_uri(), ME)], {})
