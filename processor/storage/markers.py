"""Run ownership in storage (contract §9): a claim per run in each run root, and the walks that honour it.

The fold of one input partition refuses roots that nest with another run's, but it cannot see
the runs of other partitions that share the storage. So the storage itself carries ownership:
once a run's root is registered, the processor writes a claim, `{root}/.ckptlog-run/{name}`
naming the run (`claim`; one file per run, so two runs claiming one root never overwrite each
other), and every deletion first walks from the processor's `--storage-root` down to the
checkpoint and through the checkpoint's own tree, refusing when it meets a marker that is not
the deleting run's own at its root: a directory above the run root holding one (the run root lies
inside another run's), the root claimed by another run too, a directory between the root and the
checkpoint holding one, or one anywhere inside the checkpoint (another run's root would go with
it). A root that two runs claim, or a root inside another run's, is protected both ways: neither
run's deletions reach the other's.

Local paths are walked through directory file descriptors opened with `O_NOFOLLOW`, from the
resolved `--storage-root` (the configured bound is trusted, what lies below it is not): a run
root reached through a symlink below the bound is refused, so no deletion or claim leaves the
resolved bound (issue 20 #5). Without a bound the run root is resolved and trusted, as before.
Other protocols check with `exists` and `find`, one request per directory level.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import fsspec

from events.paths import MARKER, parse_url
from processor.storage.objects import mapped_errors, open_protocol

LOCAL = "file://"
FORMAT = "ckptlog.run-marker"
UNREADABLE = "an unreadable marker"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_TEMP = ".tmp-"
Options = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Refused:
    """Must not be done: final, nothing was touched."""

    reason: str


@dataclass(frozen=True, slots=True)
class Shared:
    """Claimed, but the root is claimed by another run too, or lies inside another run's root:
    neither run's deletions reach the other's (a deployment mistake, reported)."""

    reason: str


Outcome = None | str | Refused
"""None: done (deleted, claimed); str: a transient error (retry); Refused: never."""


def claim_name(run_id: str) -> str:
    """The file naming one run inside a root's marker directory (safe for any run id)."""
    return "run-" + hashlib.sha256(run_id.encode()).hexdigest()[:32]


def marker_body(run_id: str) -> bytes:
    return json.dumps({"format": FORMAT, "run": run_id}).encode() + b"\n"


def owner_in(data: bytes) -> str:
    """The run a claim names; one that names none counts as another run's."""
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return UNREADABLE
    run = body.get("run") if isinstance(body, dict) else None
    return run if isinstance(run, str) else UNREADABLE


def foreign(where: str, owners: Sequence[str]) -> Refused:
    named = ", ".join(repr(o) for o in owners[:3]) + (" and more" if len(owners) > 3 else "")
    return Refused(
        f"{where} holds the ownership marker of run {named} ({MARKER}): it is that run's root, and no "
        "deletion reaches into another run's root — give each run a directory of its own (contract §9)"
    )


def others(owners: set[str] | None, run_id: str) -> list[str]:
    return sorted(o for o in owners or () if o != run_id)


# -- local: walks through directory file descriptors ------------------------------------------


def local_path(url: str) -> str:
    return url[len(LOCAL) :]


@contextmanager
def opened(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def read_marker(dir_fd: int) -> set[str] | None:
    """The runs that claim this directory (None: no marker in it)."""
    try:
        fd = os.open(MARKER, _DIR, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return {UNREADABLE}  # a file or a link by that name: nobody's, so everybody is refused
        raise
    with opened(fd):
        owners = set()
        for name in os.listdir(fd):
            if name.startswith(_TEMP):
                continue
            try:
                claim = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                owners.add(UNREADABLE)
                continue
            with opened(claim):
                owners.add(owner_in(os.read(claim, 4096)))
        return owners


def open_root(root: str, outer: str | None, run_id: str, *, create: bool = False) -> int | Outcome:
    """The run root as a directory fd, reached from the resolved bound without following links and
    checked for markers on the way (see the module docstring); `create` makes missing directories
    and returns the fd whatever the markers say (the caller reports a shared root)."""
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
    above: Refused | None = None
    try:
        for at, name in enumerate(names):
            found = others(read_marker(fd), run_id)  # a run's own stale claim (an earlier root) is no bar
            if found and above is None:
                above = foreign(f"{outer}/{'/'.join(names[:at])}".rstrip("/"), found)
                if not create:
                    os.close(fd)
                    return above
            fd = _step(fd, name, create, f"{outer}/{'/'.join(names[: at + 1])}")
    except _Stop as stop:
        return stop.outcome
    return _own_root(fd, root, run_id, create, above)


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
    return _own_root(fd, root, run_id, create, None)


def _own_root(fd: int, root: str, run_id: str, create: bool, above: Refused | None) -> int | Outcome:
    """The root fd, unless another run claims the root too (when claiming: the fd all the same)."""
    try:
        found = others(read_marker(fd), run_id)
    except OSError as exc:
        os.close(fd)
        return f"could not read the marker in {root}: {exc.strerror}"
    problem = above or (foreign(root, found) if found else None)
    if problem is not None and not create:
        os.close(fd)
        return problem
    return fd


def marker_below(parent_fd: int, name: str, run_id: str) -> tuple[str, list[str]] | None:
    """The relative directory inside the directory `name` holding another run's marker, and who
    it names (depth first, links never followed), or None. Asked before a tree is removed."""
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
                        owners = others(read_marker(fd), run_id)
                        found = (rel, owners) if owners else None
                    elif entry.is_dir(follow_symlinks=False):
                        dirs.append(entry.name)
            for child in dirs if found is None else ():
                try:
                    stack.append((os.open(child, _DIR, dir_fd=fd), f"{rel}/{child}"))
                except OSError:
                    continue  # swapped for something else meanwhile: rmtree meets it again
    for fd, _ in stack:
        os.close(fd)
    return found


def claim_local(root: str, run_id: str, outer: str | None) -> Outcome | Shared:
    """Write the run's claim into its root's marker directory (making the directories on the way),
    atomically: a temporary file, then a hard link that fails if the name exists."""
    fd = open_root(root, outer, run_id, create=True)
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
            _write_claim(marker, run_id)
        return _shared(root, run_id, read_marker(fd), outer)


def _write_claim(marker: int, run_id: str) -> None:
    name = claim_name(run_id)
    try:
        os.stat(name, dir_fd=marker, follow_symlinks=False)
        return  # claimed before
    except FileNotFoundError:
        pass
    temp = f"{_TEMP}{os.getpid()}-{secrets.token_hex(4)}"
    out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=marker)
    try:
        with opened(out):
            os.write(out, marker_body(run_id))
            os.fsync(out)
        try:
            os.link(temp, name, src_dir_fd=marker, dst_dir_fd=marker, follow_symlinks=False)
        except FileExistsError:
            pass
    finally:
        os.unlink(temp, dir_fd=marker)


def _shared(root: str, run_id: str, owners: set[str] | None, outer: str | None) -> Outcome | Shared:
    """After claiming: None, or a Shared saying which other runs claim the root or lie above it."""
    if owners is None or run_id not in owners:
        return f"the claim in {root} vanished right after it was written; claiming it again"
    found = others(owners, run_id)
    if found:
        return Shared(f"{root} is claimed by run {', '.join(map(repr, found))} too")
    above = open_root(root, outer, run_id) if outer is not None else None
    if isinstance(above, int):
        os.close(above)
        return None
    return Shared(above.reason) if isinstance(above, Refused) else None


# -- other protocols: exists and find -----------------------------------------------------


def _fsspec_owners(fs: fsspec.AbstractFileSystem, directory: str) -> set[str] | None:
    path = f"{directory}/{MARKER}"
    fs.invalidate_cache(path)
    if not fs.exists(path):
        return None
    names = [p for p in fs.find(path) if not p.rsplit("/", 1)[-1].startswith(_TEMP)]
    return {owner_in(fs.cat_file(p)) for p in names} or {UNREADABLE}


def fsspec_root_problem(
    fs: fsspec.AbstractFileSystem, root: str, base: str, outer: str | None, run_id: str
) -> Refused | None:
    """A marker above the run root (from the bound down) or another run's claim at it; `base` is
    the backend's spelling of the root."""
    top = fs._strip_protocol(outer).rstrip("/") if outer is not None else base
    if top != base and base.startswith(top + "/"):
        names = base[len(top) + 1 :].split("/")
        for at in range(len(names)):
            where = "/".join([top, *names[:at]])
            found = others(_fsspec_owners(fs, where), run_id)
            if found:
                return foreign(where, found)
    found = others(_fsspec_owners(fs, base), run_id)
    return foreign(root, found) if found else None


def fsspec_path_problem(fs: fsspec.AbstractFileSystem, path: str, base: str, run_id: str) -> Refused | None:
    """Another run's marker in a directory between the root and the checkpoint, or inside it."""
    names = path[len(base) + 1 :].split("/")
    for at in range(1, len(names)):
        where = "/".join([base, *names[:at]])
        found = others(_fsspec_owners(fs, where), run_id)
        if found:
            return foreign(where, found)
    fs.invalidate_cache(path)
    for where in sorted({p.split(f"/{MARKER}/", 1)[0] for p in fs.find(path) if f"/{MARKER}/" in p}):
        found = others(_fsspec_owners(fs, where), run_id)
        if found:
            return foreign(where, found)
    return None


def claim_fsspec(root: str, run_id: str, outer: str | None, options: Options) -> Outcome | Shared:
    """The claim through the protocol's filesystem (one object per run), then read back."""
    protocol = parse_url(root).protocol
    fs = open_protocol(protocol, options.get(protocol))
    base = fs._strip_protocol(root).rstrip("/")
    with mapped_errors(root, "claim"):
        owners = _fsspec_owners(fs, base)
        if owners is None or run_id not in owners:
            fs.pipe_file(f"{base}/{MARKER}/{claim_name(run_id)}", marker_body(run_id))
            owners = _fsspec_owners(fs, base)
        if owners is None or run_id not in owners:
            return f"the claim in {root} vanished right after it was written; claiming it again"
        problem = fsspec_root_problem(fs, root, base, outer, run_id)
    return Shared(problem.reason) if problem is not None else None


def claim_all(items: Sequence[tuple[str, str]], outer: str | None, options: Options) -> list[Outcome | Shared]:
    """Claim each `(canonical root, run id)`; one outcome per item. Runs in a worker thread; never raises."""
    outcomes: list[Outcome | Shared] = []
    for root, run_id in items:
        try:
            if root.startswith(LOCAL):
                outcomes.append(claim_local(root, run_id, outer))
            else:
                outcomes.append(claim_fsspec(root, run_id, outer, options))
        except Exception as exc:  # a backend's own error type: retried
            outcomes.append(f"{type(exc).__name__}: {exc}")
    return outcomes
