"""Run ownership in storage (contract §9): a marker file in each run root, and the walks that honour it.

The fold of one input partition refuses roots that nest with another run's, but it cannot see
the runs of other partitions that share the storage. So the storage itself carries ownership:
once a run's root is registered, the processor writes `{root}/.ckptlog-run` naming the run
(`claim`), and every deletion first walks from the processor's `--storage-root` down to the
checkpoint and through the checkpoint's own tree, refusing when it meets a marker that is not
the deleting run's own at its root: a directory above the run root holding one (the run root lies
inside another run's), a directory between the root and the checkpoint holding one, or one
anywhere inside the checkpoint (another run's root would go with it). A root holding another
run's marker refuses every deletion of the run whose root it also is.

Local paths are walked through directory file descriptors opened with `O_NOFOLLOW`, from the
resolved `--storage-root` (the configured bound is trusted, what lies below it is not): a run
root reached through a symlink below the bound is refused, so no deletion or marker leaves the
resolved bound (issue 20 #5). Without a bound the run root is resolved and trusted, as before.
Other protocols check with `exists` and `find`, one request per directory level.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import fsspec

from processor.core.paths import MARKER, parse_url
from processor.storage.objects import mapped_errors, open_protocol

LOCAL = "file://"
FORMAT = "ckptlog.run-marker"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
Options = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Refused:
    """Must not be done: final, nothing was touched."""

    reason: str


Outcome = None | str | Refused
"""None: done (deleted, claimed); str: a transient error (retry); Refused: never."""


def marker_body(run_id: str) -> bytes:
    return json.dumps({"format": FORMAT, "run": run_id}).encode() + b"\n"


def owner_in(data: bytes) -> str:
    """The run a marker names; a marker that names none is nobody's (it refuses like a foreign one)."""
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return "an unreadable marker"
    run = body.get("run") if isinstance(body, dict) else None
    return run if isinstance(run, str) else "an unreadable marker"


def foreign(where: str, owner: str) -> Refused:
    return Refused(
        f"{where} holds the ownership marker of run {owner!r} ({MARKER}): it is that run's root, and no "
        "deletion reaches into another run's root — give each run a directory of its own (contract §9)"
    )


# -- local: walks through directory file descriptors ------------------------------------------


def local_path(url: str) -> str:
    return url[len(LOCAL) :]


@contextmanager
def opened(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def read_marker(dir_fd: int) -> str | None:
    """The run named by the marker in this directory (None: there is none)."""
    try:
        fd = os.open(MARKER, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a marker that is a symlink"
        raise
    with opened(fd):
        return owner_in(os.read(fd, 4096))


def open_root(root: str, outer: str | None, run_id: str, *, create: bool = False) -> int | Outcome:
    """The run root as a directory fd, reached from the resolved bound without following links and
    checked for markers on the way (see the module docstring); `create` makes missing directories."""
    if outer is None or not outer.startswith(LOCAL) or not (root == outer or root.startswith(outer + "/")):
        return _open_trusted(root, run_id, create)
    bound = os.path.realpath(local_path(outer))
    try:
        if create:
            os.makedirs(bound, exist_ok=True)  # the configured bound is trusted (the jobs would make it too)
        fd = os.open(bound, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"could not open the storage root {outer}: {exc.strerror}; check the storage and its permissions"
    names = [n for n in root[len(outer) :].split("/") if n]
    try:
        for at, name in enumerate(names):
            found = read_marker(fd)
            if found is not None:
                os.close(fd)
                return foreign(f"{outer}/{'/'.join(names[:at])}".rstrip("/"), found)
            fd = _step(fd, name, create, f"{outer}/{'/'.join(names[: at + 1])}")
    except _Stop as stop:
        return stop.outcome
    return _own_root(fd, root, run_id)


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
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return Refused(
            f"{where} is a symlink or not a directory; nothing below --storage-root is reached through a "
            "link (it could lead outside it, or into another run's root)"
        )
    return None


def _open_trusted(root: str, run_id: str, create: bool) -> int | Outcome:
    """No bound to walk from: the run root itself is resolved and trusted."""
    path = os.path.realpath(local_path(root))
    try:
        if create:
            os.makedirs(path, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return Refused(f"the run root {root} is not a directory")
    except OSError as exc:
        return f"could not open the run root {root}: {exc.strerror}; check the storage and its permissions"
    return _own_root(fd, root, run_id)


def _own_root(fd: int, root: str, run_id: str) -> int | Outcome:
    """The root fd, unless the root holds another run's marker."""
    try:
        found = read_marker(fd)
    except OSError as exc:
        os.close(fd)
        return f"could not read the marker in {root}: {exc.strerror}"
    if found is not None and found != run_id:
        os.close(fd)
        return foreign(root, found)
    return fd


def marker_below(parent_fd: int, name: str) -> str | None:
    """The relative path of a marker inside the directory `name` (depth first, links never
    followed), or None. Asked before a checkpoint's tree is removed."""
    try:
        top = os.open(name, _DIR, dir_fd=parent_fd)
    except OSError:
        return None  # not a directory (a file, a link): it holds nothing
    stack = [(top, name)]
    found = None
    while stack and found is None:
        fd, rel = stack.pop()
        with opened(fd):
            dirs = []
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.name == MARKER:
                        found = f"{rel}/{MARKER}"
                        break
                    if entry.is_dir(follow_symlinks=False):
                        dirs.append(entry.name)
            for child in dirs if found is None else ():
                try:
                    stack.append((os.open(child, _DIR, dir_fd=fd), f"{rel}/{child}"))
                except OSError:
                    continue  # swapped for something else meanwhile: rmtree meets it again
    for fd, _ in stack:
        os.close(fd)
    return found


def claim_local(root: str, run_id: str, outer: str | None) -> Outcome:
    """Write the run's marker into its root (making the directories on the way), atomically and
    never over another run's: a temporary file, then a hard link that fails if the name exists."""
    fd = open_root(root, outer, run_id, create=True)
    if not isinstance(fd, int):
        return fd if fd is not None else f"the run root {root} could not be made"
    with opened(fd), mapped_errors(root, "claim"):
        if read_marker(fd) == run_id:
            return None
        temp = f"{MARKER}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fd)
        try:
            with opened(out):
                os.write(out, marker_body(run_id))
                os.fsync(out)
            try:
                os.link(temp, MARKER, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
            except FileExistsError:
                pass  # written meanwhile: whose it is decides
        finally:
            os.unlink(temp, dir_fd=fd)
        found = read_marker(fd)
        if found is None:
            return f"the marker in {root} vanished right after it was written; claiming it again"
        return None if found == run_id else foreign(root, found)


# -- other protocols: exists and find -----------------------------------------------------


def fsspec_root_problem(fs: fsspec.AbstractFileSystem, root: str, base: str, outer: str | None, run_id: str) -> Outcome:
    """A marker above the run root (from the bound down) or another run's at it; `base` is the
    backend's spelling of the root."""
    if outer is not None and fs._strip_protocol(outer).rstrip("/") != base:
        top = fs._strip_protocol(outer).rstrip("/")
        if base.startswith(top + "/"):
            names = base[len(top) + 1 :].split("/")
            for at in range(len(names)):
                where = "/".join([top, *names[:at]])
                found = _fsspec_marker(fs, where)
                if found is not None:
                    return foreign(where, found)
    found = _fsspec_marker(fs, base)
    return foreign(root, found) if found is not None and found != run_id else None


def _fsspec_marker(fs: fsspec.AbstractFileSystem, directory: str) -> str | None:
    path = f"{directory}/{MARKER}"
    fs.invalidate_cache(path)
    if not fs.exists(path):
        return None
    return owner_in(fs.cat_file(path))


def fsspec_path_problem(fs: fsspec.AbstractFileSystem, path: str, base: str) -> Outcome:
    """A marker in a directory between the root and the checkpoint, or anywhere inside it."""
    names = path[len(base) + 1 :].split("/")
    for at in range(1, len(names)):
        where = "/".join([base, *names[:at]])
        found = _fsspec_marker(fs, where)
        if found is not None:
            return foreign(where, found)
    fs.invalidate_cache(path)
    inside = [p for p in fs.find(path) if p.rstrip("/").rsplit("/", 1)[-1] == MARKER]
    if inside:
        return foreign(inside[0].rsplit("/", 1)[0], owner_in(fs.cat_file(inside[0])))
    return None


def claim_fsspec(root: str, run_id: str, outer: str | None, options: Options) -> Outcome:
    """The marker through the protocol's filesystem; written only where none is, then read back."""
    protocol = parse_url(root).protocol
    fs = open_protocol(protocol, options.get(protocol))
    base = fs._strip_protocol(root).rstrip("/")
    with mapped_errors(root, "claim"):
        problem = fsspec_root_problem(fs, root, base, outer, run_id)
        if problem is not None:
            return problem
        if _fsspec_marker(fs, base) == run_id:
            return None
        fs.pipe_file(f"{base}/{MARKER}", marker_body(run_id))
        found = _fsspec_marker(fs, base)
    if found is None:
        return f"the marker in {root} vanished right after it was written; claiming it again"
    return None if found == run_id else foreign(root, found)


def claim_all(items: Sequence[tuple[str, str]], outer: str | None, options: Options) -> list[Outcome]:
    """Claim each `(canonical root, run id)`; one outcome per item. Runs in a worker thread; never raises."""
    outcomes: list[Outcome] = []
    for root, run_id in items:
        try:
            if root.startswith(LOCAL):
                outcomes.append(claim_local(root, run_id, outer))
            else:
                outcomes.append(claim_fsspec(root, run_id, outer, options))
        except Exception as exc:  # a backend's own error type: retried
            outcomes.append(f"{type(exc).__name__}: {exc}")
    return outcomes
