"""Pure URL arithmetic for storage confinement (contract §9): no fsspec, no I/O.

Part of the contract, so the fold, the storage adapter and the client library (the Reporter
checks a checkpoint lies under the run's root before sending) all use these same rules.

fsspec URLs are compared as (protocol, path segments). A local path and `file://` are the
same protocol. Spellings that a filesystem or fsspec could resolve to another place than
their canonical form are refused outright rather than interpreted: `..` segments (resolving
them is how a path escapes its root), `::` (fsspec URL chaining: `root/::memory` would open
another filesystem), percent-escapes, backslashes, query or fragment marks (`?versionId=`
selects another object on s3), glob characters (fsspec's `rm` expands them), control
characters, and relative local paths (they resolve against whatever the cwd is).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache, partial
from typing import NamedTuple

_LOCAL = frozenset({"", "file", "local"})
_UNSAFE = re.compile(r"::|%[0-9A-Fa-f]{2}|[\\?#*\[\x00-\x1f\x7f]")
_WHY = {
    ":": "'::' (fsspec URL chaining)",
    "%": "a percent-escape",
    "\\": "a backslash",
    "?": "a query mark",
    "#": "a fragment mark",
    "*": "a glob character",
    "[": "a glob character",
}
#: Segments a storage root needs below the protocol: a filesystem root or a bare bucket would
#: let a run's deletions reach everything on it.
_ROOT_SEGMENTS = {"file": 1, "memory": 1}
_PROTOCOL = re.compile(r"[a-z][a-z0-9+.-]*")
NAME_MAX = 255
"""Bytes in one path segment: no filesystem names a longer file or directory (a deletion there
would fail for ever), so a longer segment is refused on every protocol."""
_LONG = re.compile(rf"[^/]{{{NAME_MAX + 1}}}")

CLAIM_DIR = ".ckptlog-run"
"""The claim directory the processor writes each run root's claims into (contract §9): a file per
claimant naming the run. No checkpoint path or root may have a segment of this name (a deletion
could remove a claim)."""


class ParsedUrl(NamedTuple):
    protocol: str
    segments: tuple[str, ...]


class UnsafePath(ValueError):
    """The URL cannot name a checkpoint or a root safely (see the module docstring)."""


def unsafe_spelling(url: str) -> str | None:
    """What in `url` a filesystem could resolve to another place (None: nothing)."""
    found = _UNSAFE.search(url)
    if found is None:
        return None
    return _WHY.get(found.group()[0], "a control character")


def parse_url(url: str) -> ParsedUrl:
    """Split an absolute fsspec URL into a normalised protocol and its non-empty path segments."""
    if not url or not url.strip():
        raise UnsafePath("empty path")
    why = unsafe_spelling(url)
    if why is not None:
        raise UnsafePath(f"{url!r} has {why}")
    protocol, sep, rest = url.partition("://")
    if not sep:
        protocol, rest = "", url
    protocol = protocol.lower()
    if protocol and not _PROTOCOL.fullmatch(protocol):
        raise UnsafePath(f"{url!r} has no valid protocol before '://'")
    if protocol in _LOCAL:
        protocol = "file"
        if not rest.startswith("/"):
            raise UnsafePath(f"{url!r} is a relative local path, which would resolve against the working directory")
    parts = rest.split("/")
    segments = tuple(s for s in parts if s and s != ".")
    lead = protocol == "memory" and rest.startswith("/")  # memory:///x is memory://x to fsspec
    if protocol != "file" and len(segments) < len(parts) - (parts[-1] == "") - lead:
        raise UnsafePath(
            f"{url!r} has an empty or '.' segment: on an object store that is another key than the path "
            "without it, so it cannot be compared or deleted safely; spell it without `//` or `/./`"
        )
    if ".." in segments:
        raise UnsafePath(f"{url!r} has a '..' segment")
    if CLAIM_DIR in segments:
        raise UnsafePath(f"{url!r} names ckptlog's claim directory {CLAIM_DIR!r}")
    long = next((seg for seg in segments if len(seg.encode()) > NAME_MAX), None)
    if long is not None:
        raise UnsafePath(
            f"{url!r} has a segment of {len(long.encode())} bytes, over the {NAME_MAX} a directory name has"
        )
    return ParsedUrl(protocol, segments)


def segment_problem(name: str) -> str | None:
    """Why `name` (a run id) cannot be one directory name below a root, else None: it must be one
    safe path segment (no '/', not '.' or '..', no unsafe spelling, not the claim directory's name)."""
    if not name or name in (".", "..") or "/" in name or name == CLAIM_DIR or len(name.encode()) > NAME_MAX:
        return f"{name!r} is not one directory name"
    why = unsafe_spelling(name)
    return None if why is None else f"{name!r} has {why}"


def child(root: str, name: str) -> str:
    """`root`/`name` for a root and a safe segment (`segment_problem(name)` is None)."""
    return root.rstrip("/") + "/" + name


def root_problem(url: str) -> str | None:
    """Why `url` cannot be a run's storage root (contract §9 `unsafe_storage_root`), else None:
    unparseable, or a filesystem root or bare bucket (`/`, `file:///`, `s3://bucket`)."""
    try:
        parsed = parse_url(url)
    except UnsafePath as exc:
        return str(exc)
    if len(parsed.segments) < _ROOT_SEGMENTS.get(parsed.protocol, 2):
        what = "a filesystem root" if parsed.protocol in _ROOT_SEGMENTS else "a bucket or host root"
        return f"{url!r} is {what}, so a run's deletions could reach everything on it"
    return None


def is_within(root: str, path: str) -> bool:
    """True when `path` lies strictly below `root` (same protocol, root's segments a prefix)."""
    try:
        r, p = parse_url(root), parse_url(path)
    except UnsafePath:
        return False
    if r.protocol != p.protocol or len(p.segments) <= len(r.segments):
        return False
    return p.segments[: len(r.segments)] == r.segments


def fast_key(url: str) -> str | None:
    """`key_of(parse_url(url))` for the common, already-clean spelling; None means "parse it".

    Skips the split into segments for URLs with no `//`, `/.` or trailing `/` in the path,
    which is nearly every checkpoint path a training job reports.
    """
    protocol, sep, rest = url.partition("://")
    if not sep:
        protocol, rest = "file", url
    elif protocol in _LOCAL:
        protocol = "file"
    elif not _PROTOCOL.fullmatch(protocol):
        return None
    if "//" in rest or "/." in rest or rest.endswith("/") or rest.startswith(".") or not rest:
        return None
    if _UNSAFE.search(url) is not None or not url.isascii() or _LONG.search(rest) is not None:
        return None  # parse it: the segments' lengths in bytes decide
    if protocol == "file":
        return f"file://{rest}" if rest.startswith("/") else None
    return None if rest.startswith("/") else f"{protocol}://{rest}"


def canonical_below(prefix: str, forbidden: str = "") -> Callable[[str], object]:
    """A test for "`path` is already canonical and strictly below `prefix`" (then it is its
    own key): one regex match instead of parsing. Segments are non-empty and do not start
    with a dot, so no `//`, `/.`, `..` or trailing `/`; no character of an unsafe spelling
    (`:`, `%`, `\\`, `?`, `#`, globs, controls) nor of `forbidden` appears in a segment; ASCII
    only, at most NAME_MAX characters a segment (anything else is parsed, bytes counted).
    The segments' pattern is compiled once per `forbidden`, not per run: compiling it took
    ~0.4 ms, paid by every new run and every restored one (a partial, so states pickle)."""
    return partial(_below, prefix, len(prefix), _segments(forbidden).fullmatch)


def _below(prefix: str, start: int, tail: Callable[[str, int], object], path: str) -> object:
    return path.startswith(prefix) and tail(path, start)


def is_canonical_below(prefix: str, path: str) -> object:
    """`canonical_below(prefix)(path)` for one or two paths per prefix, without building the test (a
    restore checks each run's few keys: building a test per run cost more than its matches)."""
    return path.startswith(prefix) and _ANY_SEGMENTS(path, len(prefix))


@cache
def _segments(forbidden: str) -> re.Pattern[str]:
    allowed = "".join(sorted(set(map(chr, range(0x20, 0x7F))) - set("/:%\\?#*[" + forbidden)))
    first, rest = re.escape(allowed.replace(".", "")), re.escape(allowed)
    segment = f"[{first}][{rest}]{{0,{NAME_MAX - 1}}}"  # a positive class of printable ASCII
    return re.compile(f"{segment}(?:/{segment})*")


_ANY_SEGMENTS = _segments("").fullmatch
"""`canonical_below`'s tail test with nothing forbidden beyond the unsafe spellings (`is_canonical_below`)."""


def key_of(parsed: ParsedUrl) -> str:
    """The canonical spelling of a parsed URL (`file:///a//b/` and `/a/b` give `file:///a/b`)."""
    lead = "/" if parsed.protocol == "file" else ""
    return f"{parsed.protocol}://{lead}{'/'.join(parsed.segments)}"


def normalize(url: str) -> str:
    """A canonical spelling used for identity and duplicate detection."""
    return key_of(parse_url(url))
