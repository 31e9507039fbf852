"""Run ownership in storage (contract §9): claims in run roots, and the walks that honour them.

The fold of one input partition refuses roots that nest with another run's, but it cannot see
the runs of other partitions that share the storage. So the storage itself carries ownership:
once a run's root is registered, the processor writes a claim into `{root}/.ckptlog-run/` naming
the run and the input partition that folds it (ckptlog/processor/storage/claims.py: one file per
claimant, so claims never overwrite each other, and one run id folded by two partitions — its
records keyed or partitioned astray — is two claimants). Every deletion first walks from
`--storage-root` down to the checkpoint and through the checkpoint's own tree, refusing when it
meets another claimant's marker: above the run root (the root lies inside another run's), at
the root, between the root and the checkpoint, or anywhere inside the checkpoint. A root two
claimants share, or one inside another run's, is so protected both ways.

Local paths are walked through directory file descriptors opened with `O_NOFOLLOW`, from the
resolved `--storage-root` (the configured bound is trusted, what lies below it is not): a run
root reached through a symlink below the bound is refused, so no deletion or claim leaves the
resolved bound. Without a bound the run root is resolved and trusted. Other protocols:
ckptlog/processor/storage/remote_markers.py.

A claim is read only if it is a regular file, opened without blocking (a FIFO planted there
never stalls a worker thread); anything else in a marker directory counts as another run's. The
walk through a checkpoint's tree holds one directory descriptor per level and refuses a tree
deeper than MAX_TREE_DEPTH levels (it could not be checked, nor removed, without recursing that
deep); a directory it cannot open for any reason but "gone" or "a link" fails the deletion
(retried), never skips the subtree.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ckptlog.events.paths import MARKER, root_problem
from ckptlog.processor.storage import remote_markers
from ckptlog.processor.storage.claims import (
    CLAIMING,
    UNREADABLE,
    Claimant,
    Shared,
    claim_name,
    claimant_in,
    marker_body,
    named,
)
from ckptlog.processor.storage.objects import mapped_errors
from ckptlog.processor.storage.safety import Outcome, Refused, nesting, others, ownership

LOCAL = "file://"
MAX_TREE_DEPTH = 200
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_TEMP = ".tmp-"
_GONE = (errno.ENOENT, errno.ELOOP, errno.ENOTDIR)  # vanished, or swapped for a link or a file
Options = Mapping[str, Mapping[str, Any]]


# -- local: walks through directory file descriptors ------------------------------------------


def local_path(url: str) -> str:
    return url[len(LOCAL) :]


@contextmanager
def opened(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def read_marker(dir_fd: int) -> set[Claimant] | None:
    """Who claims this directory (None: no marker in it)."""
    try:
        fd = os.open(MARKER, _DIR, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return {UNREADABLE}  # a file or a link by that name: nobody's, so everybody is refused
        raise
    with opened(fd):
        return {_read_claim(fd, name) for name in os.listdir(fd) if not name.startswith(_TEMP)} or {CLAIMING}


def _read_claim(marker_fd: int, name: str) -> Claimant:
    """A claim file: a regular file, opened without blocking or following a link; else UNREADABLE."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=marker_fd)
    except OSError:
        return UNREADABLE
    with opened(fd):
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return UNREADABLE
        return named(name, claimant_in(os.read(fd, 4096)))


def open_root(
    root: str, outer: str | None, me: Claimant, *, create: bool = False, make: bool | None = None
) -> int | Outcome:
    """The run root as a directory fd, reached from the resolved bound without following links and
    checked for markers on the way (see the module docstring); `create` returns the fd whatever
    the markers say (the caller reports a shared root) and makes missing directories, unless `make`
    is False (then a missing one means the root is gone: None)."""
    make = create if make is None else make
    if outer is None or not outer.startswith(LOCAL) or not (root == outer or root.startswith(outer + "/")):
        return _open_trusted(root, me, create, make)
    bound = os.path.realpath(local_path(outer))
    try:
        if make:
            os.makedirs(bound, exist_ok=True)  # the configured bound is trusted (the jobs would make it too)
        fd = os.open(bound, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"could not open the storage root {outer}: {exc.strerror}; check the storage and its permissions"
    names = [n for n in root[len(outer) :].split("/") if n]
    try:
        for at, name in enumerate(names):
            found = read_marker(fd)  # the run's own stale claim (an earlier root) is no bar
            refused = None if create else nesting(f"{outer}/{'/'.join(names[:at])}".rstrip("/"), found, me)
            if refused is not None:
                os.close(fd)
                return refused
            fd = _step(fd, name, make, f"{outer}/{'/'.join(names[: at + 1])}")
    except _Stop as stop:
        return stop.outcome
    return _own_root(fd, root, me, create)


class _Stop(Exception):
    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome


def _step(fd: int, name: str, create: bool, where: str) -> int:
    """Open `name` below `fd` (closing `fd`) without following a link; _Stop says why not."""
    with opened(fd):
        try:
            return os.open(name, _DIR, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise _Stop(None) from None  # the run root is gone, and everything below it
            try:
                os.mkdir(name, 0o777, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                return os.open(name, _DIR, dir_fd=fd)
            except OSError as exc:
                raise _Stop(_refuse_link(exc, where) or f"could not open {where}: {exc.strerror}") from None
        except OSError as exc:
            raise _Stop(_refuse_link(exc, where) or f"could not open {where}: {exc.strerror}") from None


def _refuse_link(exc: OSError, where: str) -> Refused | None:
    if exc.errno == errno.ENAMETOOLONG:
        return Refused(f"{where} has a name longer than the filesystem allows: nothing can be there")
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return Refused(
            f"{where} is a symlink or not a directory; nothing below --storage-root is reached through a "
            "link (it could lead outside it, or into another run's root)"
        )
    return None


def _open_trusted(root: str, me: Claimant, create: bool, make: bool) -> int | Outcome:
    """No bound to walk from: the run root itself is resolved and trusted."""
    path = os.path.realpath(local_path(root))
    try:
        if make:
            os.makedirs(path, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return Refused(f"the run root {root} is not a directory")
    except OSError as exc:
        return f"could not open the run root {root}: {exc.strerror}; check the storage and its permissions"
    return _own_root(fd, root, me, create)


def _own_root(fd: int, root: str, me: Claimant, create: bool) -> int | Outcome:
    """The root fd, unless another claimant claims the root too (when claiming: the fd all the same)."""
    try:
        found = read_marker(fd)
    except OSError as exc:
        os.close(fd)
        return f"could not read the marker in {root}: {exc.strerror}"
    refused = None if create else ownership(root, found, me)
    if refused is not None:
        os.close(fd)
        return refused
    return fd


def marker_below(parent_fd: int, name: str, me: Claimant | None) -> Refused | None:
    """Refused when the directory `name` holds, at any depth, a marker naming another claimant
    (any marker when `me` is None), or is deeper than MAX_TREE_DEPTH. Depth first, links never
    followed, one open directory per level; OSError when a directory cannot be read (retried)."""
    try:
        top = os.open(name, _DIR, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in _GONE:
            return None  # not a directory (a file, a link) or gone: it holds nothing
        raise
    stack: list[tuple[int, str, Iterator[str] | None]] = [(top, name, None)]
    try:
        while stack:
            fd, rel, children = stack[-1]
            if children is None:
                listed = _listed(fd, rel, me)
                if isinstance(listed, Refused):
                    return listed
                children = iter(listed)
                stack[-1] = (fd, rel, children)
            child = next(children, None)
            if child is None:
                os.close(stack.pop()[0])
                continue
            if len(stack) >= MAX_TREE_DEPTH:
                return Refused(
                    f"{rel} is more than {MAX_TREE_DEPTH} directories deep: too deep to check for other runs' "
                    "roots and to remove safely; delete it by hand"
                )
            try:
                stack.append((os.open(child, _DIR, dir_fd=fd), f"{rel}/{child}", None))
            except OSError as exc:
                if exc.errno not in _GONE:
                    raise
        return None
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def _listed(fd: int, rel: str, me: Claimant | None) -> list[str] | Refused:
    """The subdirectories of `fd`, or Refused when it holds another claimant's marker."""
    dirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.name == MARKER:
                refused = nesting(rel, read_marker(fd), me)
                if refused is not None:
                    return refused
            elif entry.is_dir(follow_symlinks=False):
                dirs.append(entry.name)
    return dirs


def claim_local(root: str, me: Claimant, outer: str | None, *, reopened: bool = False) -> Outcome | Shared:
    """Write the claimant's claim into its root's marker directory (making the directories on the
    way), atomically: a temporary file, then a hard link that fails if the name exists. A retired
    claim (`me.retired`) is written only where the root still is (a root that is gone holds no
    checkpoint to keep), and whoever else claims it: it bars them all. `reopened`: the run was
    reopened (contract §3 "Reopened runs"): once its live claim is in place, its own retired claim
    (the same run and source) is removed, so the root never stands without a claim naming the run."""
    assert not (reopened and me.retired), "a reopened run's live claim replaces its retired one"
    fd = open_root(root, outer, me, create=True, make=not me.retired)
    if me.retired and fd is None:
        return None
    if not isinstance(fd, int):
        return fd if fd is not None else f"the run root {root} could not be made"
    with opened(fd), mapped_errors(root, "claim"):
        try:
            os.mkdir(MARKER, 0o755, dir_fd=fd)
        except FileExistsError:
            pass
        try:
            marker = os.open(MARKER, _DIR, dir_fd=fd)
        except OSError as exc:
            return _refuse_link(exc, f"{root}/{MARKER}") or f"could not open {root}/{MARKER}: {exc.strerror}"
        with opened(marker):
            new = _write_claim(marker, me)
            unretired = _remove_claim(marker, me._replace(retired=True), root) if reopened else None
        if unretired is not None:
            return unretired
        return None if me.retired else _shared_local(fd, root, me, outer, new)


def _remove_claim(marker: int, claimant: Claimant, root: str) -> Refused | None:
    """Remove the claim file naming `claimant` (a reopened run's own retired claim), if it is there.
    Anything but a file by that name is left, and bars every deletion as ever (`read_marker`)."""
    name = claim_name(claimant)
    try:
        if stat.S_ISDIR(os.stat(name, dir_fd=marker, follow_symlinks=False).st_mode):
            return Refused(
                f"{root}/{MARKER}/{name} is a directory where run {claimant.run!r}'s retired claim belongs; it "
                "bars the reopened run's deletions too — remove it by hand"
            )
        os.unlink(name, dir_fd=marker)
    except FileNotFoundError:
        pass
    return None


def _write_claim(marker: int, me: Claimant) -> bool:
    """Write the claim file unless it is there; True when it was written now."""
    name = claim_name(me)
    try:
        os.stat(name, dir_fd=marker, follow_symlinks=False)
        return False
    except FileNotFoundError:
        pass
    temp = f"{_TEMP}{os.getpid()}-{secrets.token_hex(4)}"
    out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=marker)
    try:
        with opened(out):
            os.write(out, marker_body(me))
            os.fsync(out)
        try:
            os.link(temp, name, src_dir_fd=marker, dst_dir_fd=marker, follow_symlinks=False)
        except FileExistsError:
            pass
    finally:
        os.unlink(temp, dir_fd=marker)
    return True


def _shared_local(root_fd: int, root: str, me: Claimant, outer: str | None, new: bool) -> Outcome | Shared:
    """After claiming: None, or a Shared naming who else claims the root, a root above it, or (for a
    new claim: its tree is small then) a root inside it."""
    claimants = read_marker(root_fd)
    if claimants is None or me not in claimants:
        return f"the claim in {root} vanished right after it was written; claiming it again"
    found = others(claimants, me)
    if found:
        return Shared(f"{root} is claimed by run {', '.join(map(str, found))} too")
    above = open_root(root, outer, me) if outer is not None else None
    if isinstance(above, int):
        os.close(above)
    elif isinstance(above, Refused):
        return Shared(above.reason)
    if new:
        for entry in os.listdir(root_fd):
            inside = marker_below(root_fd, entry, me) if entry != MARKER else None
            if inside is not None:
                return Shared(inside.reason)
    return None


def claim_all(
    items: Sequence[tuple[str, Claimant]], outer: str | None, options: Options, *, reopened: bool = False
) -> list[Outcome | Shared]:
    """Claim each `(canonical root, claimant)`; one outcome per item. Runs in a worker thread; never raises.
    `reopened`: the claimants are reopened runs' live claimants, whose own retired claims go (`claim_local`)."""
    outcomes: list[Outcome | Shared] = []
    for root, me in items:
        problem = root_problem(root)  # the fold refuses such roots: a claim never trusts that
        if problem is not None:
            outcomes.append(Refused(f"the run root is unsafe: {problem}"))
            continue
        if outer is not None and root != outer and not root.startswith(outer + "/"):  # never trusted then
            outcomes.append(Refused(f"the run root lies outside --storage-root {outer}: no claim is written there"))
            continue
        try:
            if root.startswith(LOCAL):
                outcomes.append(claim_local(root, me, outer, reopened=reopened))
            else:
                outcomes.append(remote_markers.claim(root, me, outer, options, reopened=reopened))
        except Exception as exc:  # a backend's own error type: retried
            outcomes.append(f"{type(exc).__name__}: {exc}")
    return outcomes
