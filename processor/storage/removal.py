"""Deleting a batch of canonical checkpoint URLs in one worker-thread call (contract §9).

One call per batch, not per path: a thread hop per path cost more than deleting a missing
local path. Every path gets its own outcome, so one failing path never fails, or repeats,
the others: `None` (confirmed gone), an error text (transient: retried), or `Refused`
(final: nothing was touched, and retrying cannot help).

Local paths (`file://`) are deleted relative to the run's *resolved* root through directory
file descriptors: every directory below the root is opened with `O_NOFOLLOW`, so a symlink at
any depth is never followed (a symlinked directory inside the path is refused: it could lead
outside the root, or into another checkpoint), a checkpoint that is itself a symlink is
unlinked, and a real directory is removed by `shutil.rmtree(dir_fd=…)`, which never follows a
link either. A path that is swapped for a symlink between the checks and the removal is caught
the same way, by the kernel. Other protocols go through fsspec without URL chaining (`::` never
reaches here: confinement refuses it, and `fsspec.filesystem(protocol)` would not chain), and
the backend's own spelling of the path must lie strictly below the backend's spelling of the
root, a check independent of the canonical one done before.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from processor.core.paths import parse_url
from processor.errors import StorageError
from processor.failpoints import crash_point
from processor.storage.objects import mapped_errors, open_protocol

_LOCAL = "file://"
Options = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Refused:
    """A path that must not be deleted: final, nothing was touched."""

    reason: str


Outcome = None | str | Refused
"""None: confirmed gone; str: a transient error (retry); Refused: never delete it."""


def remove_all(items: Sequence[tuple[str, str]], options: Options) -> list[Outcome]:
    """Delete each `(url, root)` recursively, confined to its root; one outcome per item.

    `url` and `root` are canonical (processor.core.paths.normalize) and `url` lies strictly
    below `root` (checked by the caller). Already gone counts as deleted. Runs in a worker
    thread; never raises. Local roots are opened once per batch."""
    roots: dict[str, int | Outcome] = {}
    outcomes: list[Outcome] = []
    try:
        for url, root in items:
            outcomes.append(_remove_one(url, root, options, roots))
            crash_point("deletion.after_one")  # some of a batch deleted, none confirmed
        return outcomes
    finally:
        for fd in roots.values():
            if isinstance(fd, int):
                os.close(fd)


def _remove_one(url: str, root: str, options: Options, roots: dict[str, int | Outcome]) -> Outcome:
    try:
        if url.startswith(_LOCAL):
            return _remove_local(url, root, roots)
        return _remove_fsspec(url, root, options)
    except StorageError as exc:
        return str(exc)
    except Exception as exc:  # an unknown backend error must not drop the deletion
        return f"{type(exc).__name__}: {exc}"


def _remove_local(url: str, root: str, roots: dict[str, int | Outcome]) -> Outcome:
    """Walk from the resolved root to the checkpoint's parent without following any link,
    then remove the checkpoint's entry in that directory."""
    root_fd = roots.get(root, -1)
    if root_fd == -1:
        root_fd = roots[root] = _open_root(root)
    if not isinstance(root_fd, int):
        return root_fd  # the root is gone (so is everything below it) or cannot be opened
    parts = url[len(root) + 1 :].split("/")
    with mapped_errors(url, "delete"):
        parent = _open_below(root_fd, parts[:-1], url)
        if not isinstance(parent, int):
            return parent
        try:
            return _remove_entry(parent, parts[-1], url)
        finally:
            if parent != root_fd:
                os.close(parent)


def _open_root(root: str) -> int | Outcome:
    """The run root, resolved once (it may be a mount reached through a link: the configured
    root is trusted, what lies below it is not)."""
    path = os.path.realpath(root[len(_LOCAL) :])
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return Refused(f"the run root {root} is not a directory")
    except OSError as exc:
        return f"could not open the run root {root}: {exc.strerror}; check the storage and its permissions"


def _open_below(root_fd: int, dirs: Sequence[str], url: str) -> int | Outcome:
    """The directory `dirs` below the root, opened one component at a time with O_NOFOLLOW."""
    fd = root_fd
    try:
        for name in dirs:
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                return None  # a parent is gone, so is the checkpoint
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    return Refused(
                        f"{name!r} inside {url} is a symlink or not a directory; a deletion never follows a "
                        "link (it could lead outside the run's root or into another checkpoint)"
                    )
                raise
            if fd != root_fd:
                os.close(fd)
            fd = child
    except BaseException:
        if fd != root_fd:
            os.close(fd)
        raise
    return fd


def _remove_entry(parent: int, name: str, url: str) -> Outcome:
    """Unlink a file or symlink, rmtree a real directory (fd-based: links are not followed);
    then confirm the name is gone."""
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None
    try:
        if stat.S_ISDIR(mode):
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


def _remove_fsspec(url: str, root: str, options: Options) -> Outcome:
    """Delete through fsspec and confirm with a fresh existence check (listing caches bypassed)."""
    protocol = parse_url(url).protocol
    fs = open_protocol(protocol, options.get(protocol))
    path, base = fs._strip_protocol(url).rstrip("/"), fs._strip_protocol(root).rstrip("/")
    if not base.strip("/") or not path.startswith(base + "/") or len(path) <= len(base) + 1:
        return Refused(f"the backend spells {url} as {path!r}, which is not strictly below the root's {base!r}")
    with mapped_errors(url, "delete"):
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
