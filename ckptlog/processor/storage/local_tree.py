"""The local storage tree (`file://`, contract §9): tree.py's `StorageTree` through directory file descriptors.

Every directory below the start (the resolved `--storage-root`, or a run root trusted without one)
is opened with `O_NOFOLLOW` relative to its parent's descriptor: a link at any depth is never
followed, also one swapped in between a check and the removal (the kernel says ELOOP). A checkpoint
that is a link is unlinked, a directory removed by `shutil.rmtree(dir_fd=…)`, which follows no link.
A claim is read only if it is a regular file, opened without blocking (a FIFO planted there never
stalls a worker thread), its first CLAIM_BYTES only; anything else in a claim directory counts as
another run's. The walk through a checkpoint's tree holds one descriptor per level, refuses a tree
deeper than MAX_TREE_DEPTH, and fails (retried) at a directory it cannot open for any reason but
"gone" or "a link", never skipping it. A claim is written as a temporary file, then hard-linked
into place, which fails if the name exists (taken as written).
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from ckptlog.errors import StorageError
from ckptlog.events.paths import CLAIM_DIR
from ckptlog.processor.storage.claims import (
    CLAIM_BYTES,
    CLAIMING,
    TEMP_PREFIX,
    UNREADABLE,
    Claimant,
    claim_body,
    claim_name,
    claimant_in,
    named,
)
from ckptlog.processor.storage.safety import Refused, Stop, nesting

LOCAL = "file://"
MAX_TREE_DEPTH = 200
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_GONE = (errno.ENOENT, errno.ELOOP, errno.ENOTDIR)  # vanished, or swapped for a link or a file


def local_path(url: str) -> str:
    return url[len(LOCAL) :]


@contextmanager
def opened(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


class LocalTree:
    """The local `StorageTree`: `start` opens the one directory a walk trusts."""

    def start(self, url: str, make: bool, bound: bool) -> LocalDir:
        path = os.path.realpath(local_path(url))
        try:
            if make:
                os.makedirs(path, exist_ok=True)  # the configured bound is trusted (the jobs would make it too)
            return LocalDir(os.open(path, os.O_RDONLY | os.O_DIRECTORY))
        except FileNotFoundError:
            raise Stop(None) from None
        except OSError as exc:
            if isinstance(exc, NotADirectoryError) and not bound:
                raise Stop(Refused(f"the run root {url} is not a directory")) from None
            what = "storage root" if bound else "run root"
            raise Stop(
                f"could not open the {what} {url}: {exc.strerror}; check the storage and its permissions"
            ) from None

    def spelling_problem(self, url: str, root: str) -> Refused | None:
        return None  # a local path is its canonical spelling


LOCAL_TREE = LocalTree()


@dataclass(slots=True)
class LocalDir:
    """One directory of a local walk, as an open descriptor (`close` it)."""

    fd: int

    def child(self, name: str, make: bool, where: str) -> LocalDir:
        try:
            if make:
                with suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=self.fd)
            return LocalDir(os.open(name, _DIR, dir_fd=self.fd))
        except FileNotFoundError as exc:  # gone, and everything below it (made: removed meanwhile)
            raise Stop(_unopenable(exc, where) if make else None) from None
        except OSError as exc:
            raise Stop(_unopenable(exc, where)) from None

    def claimants(self) -> set[Claimant] | None:
        return _claimants(self.fd)

    def claims_below(self, name: str | None, me: Claimant | None) -> Refused | None:
        """Also refused: a tree too deep to check."""
        if name is not None:
            return _claims_below(self.fd, name, me)
        inside = (_claims_below(self.fd, n, me) for n in os.listdir(self.fd) if n != CLAIM_DIR)
        return next(filter(None, inside), None)

    def remove(self, name: str, url: str) -> None:
        """Unlink a file or link, rmtree a real directory (fd-based: links are not followed)."""
        try:
            mode = os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return
        try:
            if stat.S_ISDIR(mode):
                shutil.rmtree(name, dir_fd=self.fd)
            else:
                os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass  # removed meanwhile: confirmed below
        try:
            os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        raise still_exists(url)

    def write_claim(self, me: Claimant, root: str) -> bool:
        """Unless a file has its name (local claims are never written over)."""
        with suppress(FileExistsError):
            os.mkdir(CLAIM_DIR, 0o755, dir_fd=self.fd)
        try:
            claims = os.open(CLAIM_DIR, _DIR, dir_fd=self.fd)
        except OSError as exc:
            raise Stop(_unopenable(exc, f"{root}/{CLAIM_DIR}")) from None
        with opened(claims):
            name = claim_name(me)
            try:
                os.stat(name, dir_fd=claims, follow_symlinks=False)
                return False
            except FileNotFoundError:
                pass
            temp = f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
            out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=claims)
            try:
                with opened(out):
                    os.write(out, claim_body(me))
                    os.fsync(out)
                with suppress(FileExistsError):
                    os.link(temp, name, src_dir_fd=claims, dst_dir_fd=claims, follow_symlinks=False)
            finally:
                os.unlink(temp, dir_fd=claims)
            return True

    def remove_claim(self, claimant: Claimant, root: str) -> Refused | None:
        """Anything but a file by that name is left (and bars every deletion as ever, `claimants`)."""
        try:
            claims = os.open(CLAIM_DIR, _DIR, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        with opened(claims):
            name = claim_name(claimant)
            try:
                if stat.S_ISDIR(os.stat(name, dir_fd=claims, follow_symlinks=False).st_mode):
                    return Refused(
                        f"{root}/{CLAIM_DIR}/{name} is a directory where run {claimant.run!r}'s retired claim "
                        "belongs; it bars the reopened run's deletions too — remove it by hand"
                    )
                os.unlink(name, dir_fd=claims)
            except FileNotFoundError:
                pass
        return None

    def exists(self) -> bool:
        return True  # an open descriptor

    def close(self) -> None:
        os.close(self.fd)


def _unopenable(exc: OSError, where: str) -> Refused | str:
    if exc.errno == errno.ENAMETOOLONG:
        return Refused(f"{where} has a name longer than the filesystem allows: nothing can be there")
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return Refused(
            f"{where} is a symlink or not a directory; no walk below --storage-root follows a link (it "
            "could lead outside it or the run's root, or into another run's root or checkpoint)"
        )
    return f"could not open {where}: {exc.strerror}; check the storage and its permissions"


def _claimants(dir_fd: int) -> set[Claimant] | None:
    try:
        fd = os.open(CLAIM_DIR, _DIR, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return {UNREADABLE}  # a file or a link by that name: nobody's, so everybody is refused
        raise
    with opened(fd):
        return {_read_claim(fd, name) for name in os.listdir(fd) if not name.startswith(TEMP_PREFIX)} or {CLAIMING}


def _read_claim(claims_fd: int, name: str) -> Claimant:
    """A claim file: a regular file, opened without blocking or following a link; else UNREADABLE."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=claims_fd)
    except OSError:
        return UNREADABLE
    with opened(fd):
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return UNREADABLE
        return named(name, claimant_in(os.read(fd, CLAIM_BYTES)))


def _claims_below(parent_fd: int, name: str, me: Claimant | None) -> Refused | None:
    """Depth first, links never followed, one open directory per level; OSError when a directory
    cannot be read (retried). Not a directory (a file, a link) or gone: it holds nothing."""
    try:
        top = os.open(name, _DIR, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in _GONE:
            return None
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
    """The subdirectories of `fd`, or Refused when it holds another claimant's claim."""
    dirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.name == CLAIM_DIR:
                refused = nesting(rel, _claimants(fd), me)
                if refused is not None:
                    return refused
            elif entry.is_dir(follow_symlinks=False):
                dirs.append(entry.name)
    return dirs


def still_exists(url: str) -> StorageError:
    return StorageError(
        f"{url} still exists after deleting it; check the storage's permissions and whether something re-creates it"
    )
