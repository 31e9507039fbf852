"""The local storage tree (`file://`, contract §9): tree.py's `StorageTree` through directory file descriptors.

Every directory below the start (the resolved `--storage-root`, or a run root trusted without one)
is opened with `O_NOFOLLOW` relative to its parent's descriptor: a link at any depth is never
followed, also one swapped in between a check and the removal (the kernel says ELOOP or ENOTDIR).
A checkpoint that is a link or a file is unlinked. A directory is removed by one walk (`_Scan`):
its whole tree is read once and checked for other runs' claims, refused deeper than MAX_TREE_DEPTH,
failed (retried) at a directory it cannot open for any reason but "gone" or "a link", never
skipping it; only then is exactly what it saw removed, bottom-up, through the descriptors it
opened (`_remove_seen`). An entry that appeared since makes its directory's rmdir fail (retried,
checked again first), nothing is removed unseen, and the top's rmdir is the confirmation. A
directory moved away since (perhaps out of the run's root: a held descriptor follows it) is left
whole: it must still be at its name, the same directory, right before its entries go (`_still_there`).
A claim is read only if it is a regular file, opened without blocking (a FIFO planted there never
stalls a worker thread), its first CLAIM_BYTES only; anything else in a claim directory counts as
another run's. A claim is written as a temporary file, then hard-linked into place, which fails if
the name exists (taken as written).
"""

from __future__ import annotations

import errno
import os
import secrets
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
    """The local `StorageTree`: `start` opens the one directory a walk trusts, resolved at each start;
    `batch()` gives one that resolves each start once (for one batch of deletions: `tree.remove_all`)."""

    def __init__(self, remember: bool = False) -> None:
        self._resolved: dict[str, str] | None = {} if remember else None

    def batch(self) -> LocalTree:
        return LocalTree(remember=True)

    def start(self, url: str, make: bool, bound: bool) -> LocalDir:
        resolved = self._resolved
        path = resolved.get(url) if resolved is not None else None
        if path is None:
            path = os.path.realpath(local_path(url))  # pure Python, a lstat per component: once per batch
            if resolved is not None:
                resolved[url] = path
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

    def remove_checked(self, name: str, url: str, me: Claimant | None) -> Refused | None:
        """One walk (`_Scan`): the whole tree checked first, then exactly what it saw removed bottom-up;
        a file or a link is unlinked. Gone counts as removed; the top's rmdir is the confirmation."""
        try:
            fd = os.open(name, _DIR, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return None
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            with suppress(FileNotFoundError):
                os.unlink(name, dir_fd=self.fd)  # a link or a file (a directory again: EISDIR, retried)
            return None
        top = _Seen(name, name, fd)
        try:
            top.identity = _identity(os.fstat(fd))
            refused = _Scan(me, True).into(top, 1)
            if refused is None:
                _remove_seen(self.fd, top, url)
            return refused
        finally:
            if top.fd is not None or top.dirs:  # removed: its descriptor is closed and it held no directory
                _close_all(top)

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
    try:  # not `with opened(...)`: a generator per claim directory and claim, every root of every batch
        return {_read_claim(fd, name) for name in os.listdir(fd) if not name.startswith(TEMP_PREFIX)} or {CLAIMING}
    finally:
        os.close(fd)


def _read_claim(claims_fd: int, name: str) -> Claimant:
    """A claim file: a regular file, opened without blocking or following a link; else UNREADABLE."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=claims_fd)
    except OSError:
        return UNREADABLE
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return UNREADABLE
        return named(name, claimant_in(os.read(fd, CLAIM_BYTES)))
    finally:
        os.close(fd)


def _claims_below(parent_fd: int, name: str, me: Claimant | None) -> Refused | None:
    """`_Scan` of `name` that keeps nothing; not a directory (a file, a link) or gone: it holds nothing."""
    try:
        top = _Seen(name, name, os.open(name, _DIR, dir_fd=parent_fd))
    except OSError as exc:
        if exc.errno in _GONE:
            return None
        raise
    try:
        return _Scan(me, False).into(top, 1)
    finally:
        _close_all(top)


class _Seen:
    """A directory of a checkpoint's tree as `_Scan` saw it, `rel` from the checkpoint's parent (`spelled`).
    A plain class: one is made per deleted checkpoint (a dataclass's default factories cost more)."""

    __slots__ = ("dirs", "fd", "identity", "name", "others", "rel")

    def __init__(self, name: str, rel: str, fd: int | None, identity: tuple[int, int] | None = None) -> None:
        self.name, self.rel = name, rel
        self.fd = fd  # open while the walk holds it (None: closed, reopened by name to remove it)
        self.identity = identity  # (st_dev, st_ino) as scanned: still there by name, or left
        self.others: list[str] = []  # all but directories: files, links, FIFOs, ... (unlinked)
        self.dirs: list[_Seen] = []


class _Scan:
    """One depth-first look through a directory's tree: each directory opened with `O_NOFOLLOW`
    below its parent's descriptor (a link is never followed), its claim directory judged by
    `nesting`, refused deeper than MAX_TREE_DEPTH; OSError (retried) where a directory cannot be
    read, never a skipped subtree. `record`: what it saw is kept in the `_Seen` tree for
    `_remove_seen`, with the descriptors of its first HOLD directories left open (bounded: a wide
    tree must not exhaust the process's descriptors; the rest are reopened, never through a link, and
    must be the very directory it checked)."""

    HOLD = 8

    def __init__(self, me: Claimant | None, record: bool) -> None:
        self.me, self.record, self.hold = me, record, self.HOLD if record else 0

    def into(self, seen: _Seen, depth: int) -> Refused | None:
        fd = seen.fd
        assert fd is not None
        subdirs = []
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.name == CLAIM_DIR:
                    refused = nesting(seen.rel, _claimants(fd), self.me)
                    if refused is not None:
                        return refused
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(entry.name)
                elif self.record:
                    seen.others.append(entry.name)
        if subdirs and depth >= MAX_TREE_DEPTH:
            return Refused(
                f"{seen.rel} is more than {MAX_TREE_DEPTH} directories deep: too deep to check for other runs' "
                "roots and to remove safely; delete it by hand"
            )
        for name in subdirs:  # a loop, not a generator: two frames per level, MAX_TREE_DEPTH levels
            refused = self._child(seen, fd, name, depth)
            if refused is not None:
                return refused
        return None

    def _child(self, seen: _Seen, fd: int, name: str, depth: int) -> Refused | None:
        try:
            opened_fd = os.open(name, _DIR, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return None  # gone since it was listed, with all below it
            if exc.errno not in _GONE:
                exc.filename = f"{seen.rel}/{spelled(name)}"
                raise
            if self.record:
                seen.others.append(name)  # swapped for a link or a file since it was listed: unlinked
            return None
        below = _Seen(name, f"{seen.rel}/{spelled(name)}", opened_fd)
        if self.record:
            seen.dirs.append(below)  # before the look: `_close_all` closes it whatever happens
            below.identity = _identity(os.fstat(opened_fd))
        try:
            return self.into(below, depth + 1)
        finally:
            if self.hold > 0:
                self.hold -= 1
            else:
                below.fd = None
                os.close(opened_fd)


def spelled(name: str) -> str:
    """A name as messages give it: bytes that are no UTF-8 (surrogates, as `os` lists them) escaped
    (`\\xff`), so a refusal naming it can travel in a UTF-8 record (a `deletion_completed`)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _identity(seen_as: os.stat_result) -> tuple[int, int]:
    return seen_as.st_dev, seen_as.st_ino


def _still_there(parent: int, seen: _Seen) -> bool:
    """Is `seen.name` in `parent` still the directory the scan checked? Gone (moved away, perhaps out
    of the run's root, or removed): False, and nothing in it is touched; another directory or a
    link there: ESTALE (retried, checked again first). Held descriptors follow a directory wherever
    it is moved, so this is asked right before its entries are unlinked, never only at the scan."""
    try:
        now = os.stat(seen.name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if _identity(now) != seen.identity:
        raise OSError(errno.ESTALE, "replaced by another directory or a link after its tree was checked")
    return True


def _remove_seen(parent: int, seen: _Seen, url: str) -> None:
    """Bottom-up, what the scan saw in `seen`, then `seen` itself by name in `parent`: rmdir fails
    (ENOTEMPTY) on anything added since, ENOTDIR on a link swapped in; the path fails and is retried."""
    try:
        if seen.fd is None:
            try:
                seen.fd = os.open(seen.name, _DIR, dir_fd=parent)  # ELOOP: swapped for a link, retried
            except FileNotFoundError:
                return  # gone since the scan, with all below it
        if not _still_there(parent, seen):
            return  # moved away since the scan (perhaps outside the run's root): not this deletion's
        for name in seen.others:
            try:  # not `with suppress(...)`: two Python calls per entry, every checkpoint's files
                os.unlink(name, dir_fd=seen.fd)
            except FileNotFoundError:
                pass
        for below in seen.dirs:
            _remove_seen(seen.fd, below, url)
        fd, seen.fd = seen.fd, None
        os.close(fd)
        try:
            os.rmdir(seen.name, dir_fd=parent)
        except FileNotFoundError:
            pass
    except OSError as exc:
        raise _not_removed(url, seen.rel, exc) from None


def _not_removed(url: str, rel: str, exc: OSError) -> StorageError:
    if exc.errno == errno.ENOTEMPTY:
        return StorageError(
            f"{url} is not deleted yet: {rel} holds entries that appeared after its tree was checked for other "
            "runs' claims; nothing unchecked is removed, so the deletion is retried (checked again first)"
        )
    return StorageError(
        f"could not delete {rel} of {url}: {exc.strerror}; the deletion is retried, checked again first "
        "(if it keeps failing, check the storage's permissions)"
    )


def _close_all(seen: _Seen) -> None:
    if seen.fd is not None:
        os.close(seen.fd)
        seen.fd = None
    for below in seen.dirs:
        _close_all(below)
