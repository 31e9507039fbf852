"""Who claims a run root (contract §9): the claim files of processor/storage/markers.py and what they say.

A claim is `{root}/.ckptlog-run/{claim_name(claimant)}`, holding
`{"format": "ckptlog.run-marker", "run": RUN_ID, "source": "topic[partition]"}`: the run, and the
input partition whose fold registered its root. The processor writes one per root it registers;
the deleter reads them on its walks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from events.paths import MARKER

FORMAT = "ckptlog.run-marker"


class Claimant(NamedTuple):
    """Who claims a root: a run, as folded by one input partition (`source`, e.g. `events[3]`).
    A source of None (an offline `ckptlog fold --apply`) is every partition's."""

    run: str
    source: str | None = None

    def owns(self, claim: Claimant) -> bool:
        return (claim.run == self.run and None in (claim.source, self.source)) or claim == self

    def __str__(self) -> str:
        return repr(self.run) if self.source is None else f"{self.run!r} ({self.source})"


UNREADABLE = Claimant("\x00an unreadable claim")  # no run id holds a control character: nobody's
CLAIMING = Claimant("\x00a claim still being written")
"""A marker directory with no claim in it: its claimant made the directory and has not linked its
claim yet (another thread of this process, another processor), or died in between; the owner's
next claim fills it. Refused for now, never for good: see `foreign`."""


@dataclass(frozen=True, slots=True)
class Refused:
    """Must not be done, nothing was touched: final, unless `retry` (the check may pass later)."""

    reason: str
    retry: bool = False


@dataclass(frozen=True, slots=True)
class Shared:
    """Claimed, but the root is claimed by another claimant too, lies inside another run's root,
    or holds one: neither's deletions reach the other's (a deployment mistake, reported)."""

    reason: str


Outcome = None | str | Refused
"""None: done (deleted, claimed); str: a transient error (retry); Refused: never."""


def claim_name(claimant: Claimant) -> str:
    """The file naming one claimant inside a root's marker directory (safe for any run id)."""
    key = claimant.run if claimant.source is None else f"{claimant.run}\0{claimant.source}"
    return "run-" + hashlib.sha256(key.encode()).hexdigest()[:32]


def marker_body(claimant: Claimant) -> bytes:
    return json.dumps({"format": FORMAT, "run": claimant.run, "source": claimant.source}).encode() + b"\n"


def claimant_in(data: bytes) -> Claimant:
    """Who a claim names; one that names nobody counts as another run's."""
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return UNREADABLE
    run = body.get("run") if isinstance(body, dict) else None
    source = body.get("source") if isinstance(body, dict) else None
    if not isinstance(run, str) or not isinstance(source, str | None):
        return UNREADABLE
    return Claimant(run, source)


def others(claimants: set[Claimant] | None, me: Claimant | None) -> list[Claimant]:
    """The claimants that are not `me` (every one when `me` is None), in a stable order."""
    return sorted(c for c in claimants or () if me is None or not me.owns(c))


def foreign(where: str, claimants: Sequence[Claimant]) -> Refused:
    if all(c == CLAIMING for c in claimants):
        return Refused(
            f"{where} holds an ownership marker ({MARKER}) with no claim in it yet: a run's claim is being "
            "written there (or its writer stopped before it; the owner's next claim completes it); retried",
            retry=True,
        )
    named = ", ".join(map(str, claimants[:3])) + (" and more" if len(claimants) > 3 else "")
    return Refused(
        f"{where} holds the ownership marker of run {named} ({MARKER}): it is that run's root, and no "
        "deletion reaches into another run's root — give each run a directory of its own (contract §9)"
    )
