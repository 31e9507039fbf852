"""Pure URL arithmetic for storage confinement: no fsspec, no I/O.

fsspec URLs are compared as (protocol, path segments). A local path and `file://` are the
same protocol. `..` segments are refused outright rather than resolved, because resolving
them is exactly how a checkpoint path escapes its run's root.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

_LOCAL = frozenset({"", "file", "local"})


class ParsedUrl(NamedTuple):
    protocol: str
    segments: tuple[str, ...]


class UnsafePath(ValueError):
    """The URL has a `..` segment or is empty; never deletable, never a checkpoint."""


def parse_url(url: str) -> ParsedUrl:
    """Split an fsspec URL into a normalised protocol and its non-empty path segments."""
    if not url or not url.strip():
        raise UnsafePath("empty path")
    protocol, sep, rest = url.partition("://")
    if not sep:
        protocol, rest = "", url
    protocol = protocol.lower()
    if protocol in _LOCAL:
        protocol = "file"
    segments = tuple(s for s in rest.split("/") if s and s != ".")
    if ".." in segments:
        raise UnsafePath(f"{url!r} has a '..' segment")
    return ParsedUrl(protocol, segments)


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
    elif not protocol.islower():
        return None
    if "//" in rest or "/." in rest or rest.endswith("/") or rest.startswith(".") or not rest:
        return None
    if protocol == "file":
        return f"file://{rest}" if rest.startswith("/") else None
    return None if rest.startswith("/") else f"{protocol}://{rest}"


def canonical_below(prefix: str, forbidden: str = "") -> Callable[[str], object]:
    """A test for "`path` is already canonical and strictly below `prefix`" (then it is its
    own key): one regex match instead of parsing. Segments are non-empty and do not start
    with a dot, so no `//`, `/.`, `..` or trailing `/`; `forbidden` characters (e.g. globs)
    may appear in no segment."""
    extra = re.escape(forbidden)
    segment = f"[^/.{extra}][^/{extra}]*"
    return re.compile(f"{re.escape(prefix)}{segment}(?:/{segment})*").fullmatch


def key_of(parsed: ParsedUrl) -> str:
    """The canonical spelling of a parsed URL (`file:///a//b/` and `/a/b` give `file:///a/b`)."""
    lead = "/" if parsed.protocol == "file" else ""
    return f"{parsed.protocol}://{lead}{'/'.join(parsed.segments)}"


def normalize(url: str) -> str:
    """A canonical spelling used for identity and duplicate detection."""
    return key_of(parse_url(url))
