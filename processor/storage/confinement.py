"""Which checkpoint paths the Deleter may touch: strictly under the run's storage root and under
the processor-wide outer bound, no glob characters, no relative local paths, no `..`.

`Confinement` answers the same question as `confinement_problem` but parses each root once
(every eviction of a run names the same root) and each path once, comparing canonical
spellings by prefix: the per-path check runs on the event loop for every eviction.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from processor.core.paths import UnsafePath, canonical_below, fast_key, key_of, parse_url

_ROOT_CACHE_LIMIT = 10_000
_GLOB_CHARS = "*?["
_GLOB = re.compile(r"[*?\[]")


def _never(path: str) -> None:
    return None


class Bound:
    """A parsed root: the canonical prefix every path strictly below it starts with, and a
    matcher for the common case — a path already canonical, strictly below, without glob
    characters — that is then its own canonical URL (one regex call instead of a parse)."""

    __slots__ = ("inside", "own", "prefix", "problem")

    def __init__(self, url: str) -> None:
        self.prefix, self.problem = "", _url_problem(url)
        self.inside = False  # set by Confinement: the root lies within the outer bound
        self.own: Callable[[str], object] = _never
        if self.problem is None:
            key = key_of(parse_url(url))
            self.prefix = key if key.endswith("/") else key + "/"  # a bucket/filesystem root ends in '/'
            if not _GLOB.search(self.prefix):
                self.own = canonical_below(self.prefix, _GLOB_CHARS)

    def holds(self, key: str) -> bool:
        """True when canonical `key` lies strictly below this root."""
        return len(key) > len(self.prefix) and key.startswith(self.prefix)


Checked = tuple[str | None, str]
"""(problem, url): no problem means the path may be deleted, and `url` is its canonical spelling.
A plain tuple: one is built per eviction."""


class Confinement:
    """Per-path confinement with each root parsed once (see the module docstring)."""

    def __init__(self, outer_root: str | None = None) -> None:
        self._outer = Bound(outer_root) if outer_root is not None else None
        self._outer_root = outer_root
        self._roots: dict[str, Bound] = {}

    def check(self, path: str, root: str) -> Checked:
        """Why `path` must not be deleted (or None), and the canonical URL to delete."""
        bound = self._roots.get(root) or self._root(root)
        if bound.own(path) and bound.inside:
            return None, path  # the common case; anything else takes the full checks below
        outer = self._outer
        if "*" in path or "?" in path or "[" in path:
            return "it has glob characters (*, ?, [) that fsspec would expand", path
        key = fast_key(path)
        if key is None:  # an unusual spelling: parse it fully
            problem = _url_problem(path)
            if problem is not None:
                return problem, path
            key = key_of(parse_url(path))
        problem = bound.problem or (outer.problem if outer is not None else None)
        if problem is not None:
            return problem, key
        prefix = bound.prefix
        if len(key) <= len(prefix) or not key.startswith(prefix):
            return f"it is not strictly under the run's storage root {root}", key
        if outer is not None and not outer.holds(key):
            return f"it is not strictly under the processor's storage bound {self._outer_root}", key
        return None, key

    def _root(self, root: str) -> Bound:
        """Parse a root not seen before (the cache is cleared when it grows past its limit)."""
        if len(self._roots) >= _ROOT_CACHE_LIMIT:
            self._roots.clear()
        bound = self._roots[root] = Bound(root)
        outer = self._outer  # a root within the outer bound: every path strictly below it is strictly below both
        bound.inside = bound.problem is None and (
            outer is None or (outer.problem is None and bound.prefix.startswith(outer.prefix))
        )
        return bound


def confinement_problem(path: str, root: str, outer_root: str | None = None) -> str | None:
    """Why `path` must not be deleted, or None when it lies strictly under both bounds."""
    return Confinement(outer_root).check(path, root)[0]


def _url_problem(url: str) -> str | None:
    """A URL that can bound or name nothing: unparseable (`..`, empty) or a relative local path."""
    try:
        protocol = parse_url(url).protocol
    except UnsafePath as exc:
        return str(exc)
    if protocol == "file" and not url.split("://", 1)[-1].startswith("/"):
        return f"{url!r} is a relative local path, which would resolve against the cwd"
    return None
