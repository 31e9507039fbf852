"""Which canonical paths nest: equal to, above or below one another (contract §9).

Deleting a checkpoint removes its whole tree, so a live path nested inside (or around) an
evicted one would go with it. `Nesting` answers "does this new path nest with a live one?" in
O(depth): it counts, for every directory strictly between a common prefix (the run's root, or
nothing) and each registered path, the registered paths below it. A new path nests with a
registered one when it is registered itself, when it is such a directory (something lies
below it), or when one of its own directories is registered (it lies below something).

Which paths are registered is the caller's (a run's kept and outstanding paths are already
in its dicts; `is_live` tests them), so this index costs no second copy of every path. The
common checkpoint sits directly below its run's root: it has no directory to count, and
registering it costs one `str.find`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

IsLive = Callable[[str], bool]


class Nesting:
    """Per directory above the registered paths, how many registered paths lie below it."""

    __slots__ = ("below", "start")

    def __init__(self, start: int = 0, paths: Iterable[str] = ()) -> None:
        self.start = start  # where directories begin: the length of the common prefix
        self.below: dict[str, int] = {}
        for path in paths:
            self.add(path)

    def add(self, path: str) -> None:
        below, start = self.below, self.start
        at = path.find("/", start)
        while at > start:
            directory = path[:at]
            below[directory] = below.get(directory, 0) + 1
            at = path.find("/", at + 1)

    def add_all(self, paths: Iterable[str]) -> None:
        """`add` of every path, counted by parent directory first: a restore registers 100,000 runs'
        roots, which mostly share their parent, so each directory above is counted once per parent."""
        start = self.start
        # add() counts nothing for a path whose first '/' from `start` is at `start` (or missing)
        parents = Counter(path[: path.rfind("/")] for path in paths if path.find("/", start) > start)
        below = self.below
        for parent, count in parents.items():
            below[parent] = below.get(parent, 0) + count  # the last directory, then those above it
            at = parent.find("/", start)
            while at > start:
                directory = parent[:at]
                below[directory] = below.get(directory, 0) + count
                at = parent.find("/", at + 1)

    def discard(self, path: str) -> None:
        """Unregister `path` (which the caller had registered)."""
        below, start = self.below, self.start
        at = path.find("/", start)
        while at > start:
            directory = path[:at]
            left = below.get(directory, 1) - 1
            if left:
                below[directory] = left
            else:
                below.pop(directory, None)
            at = path.find("/", at + 1)

    def nested(self, path: str, is_live: IsLive, live: Callable[[], Iterable[str]]) -> str | None:
        """A registered path equal to, above or below `path` (None: nothing nests with it).
        `live()` lists the registered paths; it is only called to name one below `path`."""
        if is_live(path):
            return path
        return self.around(path, is_live, live)

    def around(self, path: str, is_live: IsLive, live: Callable[[], Iterable[str]]) -> str | None:
        """`nested` for a `path` the caller knows is not registered itself."""
        if path in self.below:  # the smallest: `live()`'s order is not the log's after a restore
            prefix = path + "/"
            return min((p for p in live() if p.startswith(prefix)), default=prefix)
        start = self.start
        at = path.find("/", start)
        while at > start:
            directory = path[:at]
            if is_live(directory):
                return directory
            at = path.find("/", at + 1)
        return None
