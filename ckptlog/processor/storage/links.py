"""Whether a run root is reached through a symlink below `--storage-root` (contract §9 *Roots
behind a symlink*): what the processor looks at when it registers a root, before the batch
registering it commits (ckptlog/processor/service/linked.py puts what it saw into the log).

Only a local root (`file://`: the canonical spelling of `/…` and `local://` too) below a local
`--storage-root` is looked at. The deleter walks such a root from the resolved bound without
following links (ckptlog/processor/storage/local_tree.py), so a link anywhere between the bound and
the root, the root itself included, means that no deletion of the run would ever be carried out.
Other protocols have no links; without a bound the deleter resolves the run root and trusts it.

The look is the deleter's own walk (ckptlog/processor/storage/tree.py, local_tree.py): from the
resolved bound (trusted, as the deleter trusts it) each directory below it is opened without
following a link, down to the root; the first name that is a link is the answer.
A name that does not exist yet ends the look (nothing below it can be a link yet; one
made later is refused by the deleter's walk, as ever), and so does one that is not a directory
(the claim and the deleter refuse it on their own) or cannot be read: the look tells a sender
early, it is not what keeps storage safe, so it says "no link seen" rather than hold up the batch.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Sequence

from ckptlog.events.paths import UnsafePath, key_of, parse_url
from ckptlog.processor.storage.local_tree import LOCAL, LOCAL_TREE
from ckptlog.processor.storage.safety import Stop

log = logging.getLogger(__name__)

LOOK_TIMEOUT_S = 5.0
"""How long the look at a batch's new roots may take; past it the batch commits without it."""
Claim = tuple[str, str]
"""(canonical run root, run id): a root a batch registered."""


def bound_key(outer: str | None) -> str | None:
    """The canonical spelling of `--storage-root` when it is local (None: nothing is looked at)."""
    if outer is None:
        return None
    try:
        key = key_of(parse_url(outer))
    except UnsafePath:
        return None  # the fold refuses every root under an unsafe bound, and the deleter every deletion
    return key if key.startswith(LOCAL) else None


def link_on_the_way(root: str, outer: str) -> str | None:
    """What makes canonical `root` reached through a link below the canonical local bound `outer`:
    `"file:///b/x is a symlink (to '/elsewhere')"`; None when no link is seen (module docstring)."""
    if not root.startswith(outer + "/"):
        return None  # the bound itself is trusted; a root outside it is refused by the fold
    try:
        here = LOCAL_TREE.start(outer, False, True)  # the deleter's own walk (tree.reach_root)
    except Stop:
        return None  # no bound yet: nothing below it either
    at = outer
    try:
        for name in root[len(outer) + 1 :].split("/"):
            at = f"{at}/{name}"
            try:
                here, above = here.child(name, False, at), here
            except Stop:  # a link, or not there (yet), not a directory, not readable: no link seen
                return _link(here.fd, name, at)
            above.close()
        return None
    finally:
        here.close()


def _link(fd: int, name: str, where: str) -> str | None:
    try:
        if not stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            return None
    except OSError:
        return None
    try:
        return f"{where} is a symlink (to {os.readlink(name, dir_fd=fd)!r})"
    except OSError:
        return f"{where} is a symlink"


def links_on_the_way(claims: Sequence[Claim], outer: str) -> dict[Claim, str]:
    """`link_on_the_way` for each claim: the ones a link leads to, with what was seen. Never raises."""
    found: dict[Claim, str] = {}
    for claim in claims:
        try:
            seen = link_on_the_way(claim[0], outer)
        except OSError as exc:  # a descriptor that could not be had: no link seen
            log.warning("event=root_look_failed run=%r root=%r error=%s", claim[1], claim[0], exc)
            seen = None
        if seen is not None:
            found[claim] = seen
    return found


async def look(claims: Sequence[Claim], outer: str | None, timeout_s: float = LOOK_TIMEOUT_S) -> dict[Claim, str]:
    """The roots of `claims` a link below the bound `outer` (the `--storage-root` setting, in any
    spelling) leads to, looked at off the event loop; {} when none, when nothing is local, or when
    the storage does not answer within `timeout_s` (logged: no fact is written then)."""
    bound = bound_key(outer)
    local = [claim for claim in claims if bound is not None and claim[0].startswith(bound + "/")]
    if bound is None or not local:
        return {}
    try:
        return await asyncio.wait_for(asyncio.to_thread(links_on_the_way, local, bound), timeout_s)
    except TimeoutError:
        log.warning(
            "event=root_look_timeout roots=%d bound=%r: the storage did not answer within %.1fs; these roots are "
            "not looked at (a link on the way still stops every deletion of theirs, contract §9)",
            len(local),
            bound,
            timeout_s,
        )
    except Exception:  # a fault of the look itself: no fact, and the batch commits (the walk stays the safety)
        log.exception("event=root_look_failed roots=%d bound=%r: these roots are not looked at", len(local), bound)
    return {}
