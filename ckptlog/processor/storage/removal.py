"""Deleting a batch of canonical checkpoint URLs in one worker-thread call (contract §9).

One call per batch, not per path: a thread hop per path cost more than deleting a missing
local path. Every path gets its own outcome, so one failing path never fails, or repeats,
the others: `None` (confirmed gone), an error text (transient: retried), or `Refused`
(final: nothing was touched, and retrying cannot help).

Local paths (`file://`) are deleted relative to the run root reached from the *resolved*
`--storage-root` through directory file descriptors (ckptlog.processor.storage.markers): every
directory below the bound is opened with `O_NOFOLLOW`, so a symlink at any depth is never
followed (a symlinked directory on the way is refused: it could lead outside the root, or into
another checkpoint), a checkpoint that is itself a symlink is
unlinked, and a real directory is removed by `shutil.rmtree(dir_fd=…)`, which never follows a
link either. A path that is swapped for a symlink between the checks and the removal is caught
the same way, by the kernel. Other protocols go through fsspec without URL chaining (`::` never
reaches here: confinement refuses it, and `fsspec.filesystem(protocol)` would not chain), and
the backend's own spelling of the path must lie strictly below the backend's spelling of the
root, a check independent of the canonical one done before.

Before anything is removed, the walk honours run ownership (contract §9, ckptlog.processor.storage.markers):
a marker of another run above the root, at it, between it and the checkpoint or anywhere inside
the checkpoint refuses the deletion.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from typing import Any

from ckptlog.errors import StorageError
from ckptlog.events.paths import parse_url
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.storage import remote_markers
from ckptlog.processor.storage.claims import Claimant
from ckptlog.processor.storage.markers import LOCAL, marker_below, open_root, read_marker
from ckptlog.processor.storage.objects import mapped_errors, open_protocol
from ckptlog.processor.storage.safety import Outcome, Refused, nesting

__all__ = ["Outcome", "Refused", "remove_all"]

Options = Mapping[str, Mapping[str, Any]]
Item = tuple[str, str, Claimant]
"""(canonical url, canonical run root, who deletes: the run and the partition folding it)."""


def remove_all(items: Sequence[Item], options: Options, outer: str | None = None) -> list[Outcome]:
    """Delete each `(url, root, claimant)` recursively, confined to its root and to the resolved
    `outer` bound (canonical, or None); one outcome per item.

    `url` and `root` are canonical (ckptlog.events.paths.normalize) and `url` lies strictly
    below `root` (checked by the caller). Already gone counts as deleted. Runs in a worker
    thread; never raises. Each run root is reached and checked once per batch."""
    roots: dict[tuple[str, Claimant], int | Outcome] = {}
    outcomes: list[Outcome] = []
    try:
        for url, root, me in items:
            outcomes.append(_remove_one(url, root, me, options, outer, roots))
            crash_point("deletion.after_one")  # some of a batch deleted, none confirmed
        return outcomes
    finally:
        for fd in roots.values():
            if isinstance(fd, int):
                os.close(fd)


Roots = dict[tuple[str, Claimant], int | Outcome]
"""Each run root reached once per batch: its fd (local), or what its check found."""


def _remove_one(url: str, root: str, me: Claimant, options: Options, outer: str | None, roots: Roots) -> Outcome:
    try:
        if url.startswith(LOCAL):
            return _remove_local(url, root, me, outer, roots)
        return _remove_fsspec(url, root, me, options, outer, roots)
    except StorageError as exc:
        return str(exc)
    except Exception as exc:  # an unknown backend error must not drop the deletion
        return f"{type(exc).__name__}: {exc}"


def _remove_local(url: str, root: str, me: Claimant, outer: str | None, roots: Roots) -> Outcome:
    """Walk from the root to the checkpoint's parent without following any link, checking for
    markers, then remove the checkpoint's entry in that directory."""
    root_fd = roots.get((root, me), -1)
    if root_fd == -1:
        with mapped_errors(root, "delete"):
            root_fd = roots[(root, me)] = open_root(root, outer, me)
    if not isinstance(root_fd, int):
        return root_fd  # the root is gone (so is everything below it), cannot be opened, or is not the run's
    parts = url[len(root) + 1 :].split("/")
    with mapped_errors(url, "delete"):
        parent = _open_below(root_fd, parts[:-1], root, me, url)
        if not isinstance(parent, int):
            return parent
        try:
            return _remove_entry(parent, parts[-1], me, url)
        finally:
            if parent != root_fd:
                os.close(parent)


def _open_below(root_fd: int, dirs: Sequence[str], root: str, me: Claimant, url: str) -> int | Outcome:
    """The directory `dirs` below the root, opened one component at a time with O_NOFOLLOW; a
    directory on the way holding a marker is another run's root."""
    fd = root_fd
    try:
        for at, name in enumerate(dirs):
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                return None  # a parent is gone, so is the checkpoint
            except OSError as exc:
                if exc.errno == errno.ENAMETOOLONG:
                    return Refused(f"{name!r} inside {url} is longer than the filesystem allows: nothing is there")
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    return Refused(
                        f"{name!r} inside {url} is a symlink or not a directory; a deletion never follows a "
                        "link (it could lead outside the run's root or into another checkpoint)"
                    )
                raise
            if fd != root_fd:
                os.close(fd)
            fd = child
            refused = nesting(f"{root}/{'/'.join(dirs[: at + 1])}", read_marker(fd), me)
            if refused is not None:
                os.close(fd)
                return refused
    except BaseException:
        if fd != root_fd:
            os.close(fd)
        raise
    return fd


def _remove_entry(parent: int, name: str, me: Claimant, url: str) -> Outcome:
    """Unlink a file or symlink, rmtree a real directory (fd-based: links are not followed) unless
    another run's marker lies inside it; then confirm the name is gone."""
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None
    try:
        if stat.S_ISDIR(mode):
            refused = marker_below(parent, name, me)  # another run's root inside, or too deep to check
            if refused is not None:
                return Refused(f"in {url}: {refused.reason}", refused.retry)
            shutil.rmtree(name, dir_fd=parent)
        else:
            os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        pass  # removed meanwhile: confirmed below
    try:
        os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None
    raise _still_exists(url)


def _remove_fsspec(url: str, root: str, me: Claimant, options: Options, outer: str | None, roots: Roots) -> Outcome:
    """Delete through fsspec and confirm with a fresh existence check (listing caches bypassed)."""
    protocol = parse_url(url).protocol
    fs = open_protocol(protocol, options.get(protocol))
    path, base = fs._strip_protocol(url).rstrip("/"), fs._strip_protocol(root).rstrip("/")
    if not base.strip("/") or not path.startswith(base + "/") or len(path) <= len(base) + 1:
        return Refused(f"the backend spells {url} as {path!r}, which is not strictly below the root's {base!r}")
    with mapped_errors(url, "delete"):
        checked = roots.get((root, me), -1)
        if checked == -1:
            checked = roots[(root, me)] = remote_markers.root_problem(fs, root, base, outer, me)
        problem = checked if not isinstance(checked, int) else None
        problem = problem or remote_markers.path_problem(fs, path, base, me)
        if problem is not None:
            return problem
        try:
            fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass
        fs.invalidate_cache(path)
        if fs.exists(path):
            raise _still_exists(url)
    return None


def _still_exists(url: str) -> StorageError:
    return StorageError(
        f"{url} still exists after deleting it; check the storage's permissions and whether something re-creates it"
    )
