"""Which checkpoint paths the Deleter may touch (contract §9, the deleter's half): strictly under the
run's storage root and under the processor-wide outer bound, in a spelling no filesystem could
resolve elsewhere (ckptlog.events.paths: no `..`, `::`, globs, escapes, relative local paths),
with roots that are neither a filesystem root nor a bare bucket.

`Confinement` parses each root once (every eviction of a run names the same root) and each
path once, comparing canonical spellings by prefix: the per-path check runs on the event loop
for every eviction.
"""

from __future__ import annotations

from collections.abc import Callable

from ckptlog.events.paths import UnsafePath, canonical_below, fast_key, key_of, parse_url, root_problem

_ROOT_CACHE_LIMIT = 10_000


def _never(path: str) -> None:
    return None


class Bound:
    """A parsed root: its canonical spelling (`key`), the prefix every path strictly below it
    starts with, and a matcher for the common case — a path already canonical and strictly
    below — that is then its own canonical URL (one regex call instead of a parse)."""

    __slots__ = ("inside", "key", "own", "prefix", "problem")

    def __init__(self, url: str) -> None:
        self.key, self.prefix, self.problem = "", "", root_problem(url)
        self.inside = False  # set by Confinement: the root lies within the outer bound
        self.own: Callable[[str], object] = _never
        if self.problem is None:
            self.key = key_of(parse_url(url))
            self.prefix = self.key + "/"
            self.own = canonical_below(self.prefix)

    def holds(self, key: str) -> bool:
        """True when canonical `key` lies strictly below this root."""
        return len(key) > len(self.prefix) and key.startswith(self.prefix)


Checked = tuple[str | None, str, str]
"""(problem, url, root): no problem means the path may be deleted, `url` is its canonical
spelling and `root` the canonical spelling of its run's root. A plain tuple: one is built per
eviction."""


class Confinement:
    """Per-path confinement with each root parsed once (see the module docstring)."""

    def __init__(self, outer_root: str | None = None) -> None:
        self._outer = Bound(outer_root) if outer_root is not None else None
        self._outer_root = outer_root
        self._roots: dict[str, Bound] = {}

    @property
    def outer_key(self) -> str | None:
        """The canonical spelling of the outer bound (None: there is none, or it is unsafe)."""
        return self._outer.key or None if self._outer is not None else None

    def check(self, path: str, root: str) -> Checked:
        """Why `path` must not be deleted (or None), its canonical URL and its root's."""
        bound = self._roots.get(root) or self._root(root)
        if bound.own(path) and bound.inside:
            return None, path, bound.key  # the common case; anything else takes the full checks below
        key = fast_key(path)
        if key is None:  # an unusual spelling: parse it fully
            try:
                key = key_of(parse_url(path))
            except UnsafePath as exc:
                return str(exc), path, bound.key
        outer = self._outer
        problem = bound.problem and f"the run's storage root is unsafe: {bound.problem}"
        if not problem and outer is not None and outer.problem:
            problem = f"the processor's storage bound is unsafe: {outer.problem}"
        if problem:
            return problem, key, bound.key
        if not bound.holds(key):
            return f"it is not strictly under the run's storage root {root}", key, bound.key
        if outer is not None and not outer.holds(key):
            return f"it is not strictly under the processor's storage bound {self._outer_root}", key, bound.key
        return None, key, bound.key

    def _root(self, root: str) -> Bound:
        """Parse a root not seen before (the cache is cleared when it grows past its limit)."""
        if len(self._roots) >= _ROOT_CACHE_LIMIT:
            self._roots.clear()
        bound = self._roots[root] = Bound(root)
        outer = self._outer  # a root within the outer bound: every path strictly below it is strictly below both
        bound.inside = bound.problem is None and (
            outer is None or (outer.problem is None and (bound.key == outer.key or outer.holds(bound.key)))
        )
        return bound


def confinement_problem(path: str, root: str, outer_root: str | None = None) -> str | None:
    """Why `path` must not be deleted, or None when it lies strictly under both bounds."""
    return Confinement(outer_root).check(path, root)[0]
