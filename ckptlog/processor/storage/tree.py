"""The storage tree every deletion and claim walks (contract §9): one interface, the walks written once.

`StorageTree` and `Directory` are what a walk needs of a storage: start from `--storage-root` (or
a run root trusted without one), step one directory down without following a link, read the claims
of a directory, look for claims anywhere below one, remove an entry, write and remove a claim file.
ckptlog/processor/storage/local_tree.py implements them with directory file descriptors,
remote_tree.py with the protocol's own fsspec filesystem. The walks are here (`reach_root`,
`remove_all`) and in claim_writer.py (`claim_all`); what they check, and the verdicts, are
ckptlog/processor/storage/safety.py's. A batch of deletions is one worker-thread call (a thread hop
per path cost more than deleting a missing local path), each path its own outcome.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ckptlog.errors import StorageError
from ckptlog.events.paths import parse_url
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.storage.claims import Claimant
from ckptlog.processor.storage.local_tree import LOCAL, LOCAL_TREE
from ckptlog.processor.storage.objects import mapped_error, open_protocol
from ckptlog.processor.storage.remote_tree import RemoteTree
from ckptlog.processor.storage.safety import Outcome, Refused, Stop, judged, nesting, ownership

Options = Mapping[str, Mapping[str, Any]]
Item = tuple[str, str, Claimant]
"""(canonical url, canonical run root, who deletes: the run and the partition folding it)."""
Roots = dict[tuple[str, Claimant], "Directory | Stop"]
"""Each run root reached once per batch, or why it could not be."""


class Directory(Protocol):
    """One directory a walk reached; a step that cannot be taken raises `safety.Stop` with why."""

    def child(self, name: str, make: bool, where: str) -> Directory:
        """`name` below this one (`where`, for messages), never through a link; made if `make`,
        else missing: Stop(None)."""

    def claimants(self) -> set[Claimant] | None:
        """Who its claim directory names (None: it has none)."""

    def claims_below(self, name: str | None, me: Claimant | None) -> Refused | None:
        """Another claimant's claim at or anywhere below `name` (None: below this directory)."""

    def remove_checked(self, name: str, url: str, me: Claimant) -> Refused | None:
        """Look for another claimant's claim anywhere at or below `name` (or a tree too deep to
        check); none: remove `name` and all below it and confirm it is gone (StorageError if not).
        Refused: nothing was removed."""

    def write_claim(self, me: Claimant, root: str) -> bool:
        """Write `me`'s claim into its claim directory unless it is in place; True when written now."""

    def remove_claim(self, claimant: Claimant, root: str) -> Refused | None:
        """Remove `claimant`'s claim file, if it is there."""

    def exists(self) -> bool: ...

    def close(self) -> None: ...


class StorageTree(Protocol):
    """A storage's tree of directories: where a walk starts."""

    def start(self, url: str, make: bool, bound: bool) -> Directory:
        """The directory at canonical `url`, `--storage-root` (`bound`) or a run root without one:
        the one place a walk trusts, resolved."""

    def spelling_problem(self, url: str, root: str) -> Refused | None:
        """Refused when the storage's own spelling of `url` is not its root's followed by the rest."""


def tree_for(url: str, options: Options, local: StorageTree = LOCAL_TREE) -> StorageTree:
    if url.startswith(LOCAL):
        return local
    protocol = parse_url(url).protocol
    return RemoteTree(open_protocol(protocol, options.get(protocol)))


def reach_root(
    tree: StorageTree, root: str, outer: str | None, me: Claimant, *, create: bool = False, make: bool = False
) -> Directory:
    """The run root, reached from `outer` (`--storage-root`, canonical; None or not above the root:
    the root itself is the start) one directory at a time; each above the root is checked with
    `safety.nesting`, the root with `safety.ownership`, unless `create` (a claim: it is told after
    writing what it shares); `make` makes missing directories (else one missing: Stop(None))."""
    bound = outer is not None and (root == outer or root.startswith(outer + "/"))
    at = outer if bound and outer is not None else root
    here = tree.start(at, make, bound)
    try:
        for name in (n for n in root[len(at) :].split("/") if n):
            if not create:
                judged(nesting(at, here.claimants(), me))
            at = f"{at}/{name}"
            here, above = here.child(name, make, at), here
            above.close()
        if not create:
            judged(ownership(root, here.claimants(), me))
    except BaseException:
        here.close()
        raise
    return here


def remove_all(items: Sequence[Item], options: Options, outer: str | None = None) -> list[Outcome]:
    """Delete each `(url, root, claimant)` recursively, confined to its root and to the resolved
    `outer` bound (canonical, or None); one outcome per item.

    `url` and `root` are canonical (ckptlog.events.paths.normalize) and `url` lies strictly
    below `root` (checked by the caller). Already gone counts as deleted. Runs in a worker
    thread; never raises. Each run root is reached and checked once per batch."""
    roots: Roots = {}
    outcomes: list[Outcome] = []
    local = LOCAL_TREE.batch()  # `--storage-root` resolved once per batch, not once per root
    try:
        for url, root, me in items:
            outcomes.append(_remove_one(url, root, me, options, outer, roots, local))
            crash_point("deletion.after_one")  # some of a batch deleted, none confirmed
        return outcomes
    finally:
        for reached in roots.values():
            if not isinstance(reached, Stop):
                reached.close()


def _remove_one(
    url: str, root: str, me: Claimant, options: Options, outer: str | None, roots: Roots, local: StorageTree
) -> Outcome:
    try:
        tree = tree_for(url, options, local)
        refused = tree.spelling_problem(url, root)
        if refused is not None:
            return refused
        try:  # `objects.mapped_errors`, without a context manager per path
            reached = roots.get((root, me))
            if reached is None:
                try:
                    reached = roots[(root, me)] = reach_root(tree, root, outer, me)
                except Stop as stop:  # the root is gone, cannot be opened, or is not the run's: kept as a fresh
                    reached = roots[(root, me)] = Stop(stop.outcome)  # Stop, the raised one's traceback holds `roots`
            if isinstance(reached, Stop):
                return reached.outcome
            _remove_below(reached, url, root, me)
        except Exception as exc:
            raise mapped_error(exc, url, "delete")  # noqa: B904 (a Stop or a StorageError as it is; the cause is set)
        return None
    except Stop as stop:
        return stop.outcome
    except StorageError as exc:
        return str(exc)
    except Exception as exc:  # an unknown backend error must not drop the deletion
        return f"{type(exc).__name__}: {exc}"


NOT_WALKED = frozenset(("", ".", ".."))
"""Names no walk goes down by (the caller's check 1 refuses them first; the walk does not rely on it:
`.` would remove the directory it is in, `..` would climb out of the run's root)."""


def _remove_below(root_dir: Directory, url: str, root: str, me: Claimant) -> None:
    """Down from the root to the checkpoint's parent, each directory on the way checked for
    another run's claim (its root), then the checkpoint's tree checked whole and removed."""
    names = url[len(root) + 1 :].split("/")
    if url[len(root) : len(root) + 1] != "/" or not NOT_WALKED.isdisjoint(names):
        raise Stop(Refused(f"{url} is not spelled as a path strictly under its run's root {root}; nothing was deleted"))
    here = root_dir
    try:
        for at, name in enumerate(names[:-1]):
            here, above = here.child(name, False, f"{name!r} inside {url}"), here
            if above is not root_dir:
                above.close()
            judged(nesting(f"{root}/{'/'.join(names[: at + 1])}", here.claimants(), me))
        inside = here.remove_checked(names[-1], url, me)  # another run's root inside, or too deep to check
        if inside is not None:
            raise Stop(Refused(f"in {url}: {inside.reason}", inside.retry))
    finally:
        if here is not root_dir:
            here.close()
