"""Who claims a run root (contract §9): the claim files and what they say.

A claim is a file in the root's claim directory, `{root}/.ckptlog-run/{claim_name(claimant)}`, holding
`{"format": "ckptlog.run-marker", "run": RUN_ID, "source": "topic[partition]"}`: the run, and the
input partition whose fold registered its root (the format's name keeps the word "marker" of earlier
versions: it is on disk). The processor writes one per root it registers
(ckptlog/processor/storage/claim_writer.py); the deleter reads them on its walks (tree.py).

Once a run has finished and left the hot state, the processor adds a *retired* claim beside its
claim (`retired-…`, the same body with `"retired": true`). A retired claim is nobody's: it bars
every deletion that meets it, a later run reusing the same id included, because the fold forgets
an expired run (contract §3 *Expiry*) and could otherwise take a late report of the old run for
the new one's. A finished run's checkpoints are kept for good (contract §9).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

FORMAT = "ckptlog.run-marker"
RETIRED_PREFIX = "retired-"
CLAIM_BYTES = 4096
"""How much of a claim file is read: a claim is small, and a large file planted in a claim directory
must not be read whole on every walk (it reads as nobody's)."""
TEMP_PREFIX = ".tmp-"
"""A claim being written (a local claim is linked into place from such a file): not read as a claim."""


class Claimant(NamedTuple):
    """Who claims a root: a run, as folded by one input partition (`source`, e.g. `events[3]`).
    A source of None (an offline `ckptlog fold --apply`) is every partition's. `retired`: the run
    finished and left the hot state; no live claimant owns such a claim, the run's own id included."""

    run: str
    source: str | None = None
    retired: bool = False

    def owns(self, claim: Claimant) -> bool:
        if claim.retired and not self.retired:  # a finished run's mark bars its live claimant too
            return False
        return claim.run == self.run and (None in (claim.source, self.source) or claim.source == self.source)

    def __str__(self) -> str:
        name = repr(self.run) if self.source is None else f"{self.run!r} ({self.source})"
        return f"{name} (finished)" if self.retired else name


UNREADABLE = Claimant("\x00an unreadable claim")  # no run id holds a control character: nobody's
CLAIMING = Claimant("\x00a claim still being written")
"""A claim directory with no claim in it: its claimant made the directory and has not linked its
claim yet (another thread of this process, another processor), or died in between; the owner's
next claim fills it. Refused for now, never for good: see `safety.foreign`."""


@dataclass(frozen=True, slots=True)
class Shared:
    """Claimed, but the root is claimed by another claimant too, lies inside another run's root,
    or holds one: neither's deletions reach the other's (a deployment mistake, reported)."""

    reason: str


def claim_name(claimant: Claimant) -> str:
    """The file naming one claimant inside a root's claim directory (safe for any run id)."""
    key = claimant.run if claimant.source is None else f"{claimant.run}\0{claimant.source}"
    return (RETIRED_PREFIX if claimant.retired else "run-") + hashlib.sha256(key.encode()).hexdigest()[:32]


def claim_body(claimant: Claimant) -> bytes:
    body: dict[str, object] = {"format": FORMAT, "run": claimant.run, "source": claimant.source}
    if claimant.retired:
        body["retired"] = True
    return json.dumps(body).encode() + b"\n"


def claimant_in(data: bytes) -> Claimant:
    """Who a claim names; one that names nobody counts as another run's. Remembered by the claim's
    bytes (`_parsed`: a pure function of them, a Claimant is immutable): every batch reads each root's
    claims again. Any bytes-like a storage returns is read as its bytes."""
    return _parsed(bytes(data))


@lru_cache(maxsize=1024)  # at most 1024 claims of at most CLAIM_BYTES each: a flood of planted claims is bounded
def _parsed(data: bytes) -> Claimant:
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return UNREADABLE
    if not isinstance(body, dict):
        return UNREADABLE
    run, source, retired = body.get("run"), body.get("source"), body.get("retired", False)
    if not isinstance(run, str) or not isinstance(source, str | None) or not isinstance(retired, bool):
        return UNREADABLE
    return Claimant(run, source, retired)


def named(name: str, claimant: Claimant) -> Claimant:
    """The claimant a claim file names, read under its file name: one by a retired claim's name
    that says it is live is nobody's (a local claim is not written again where its name is taken)."""
    if name.startswith(RETIRED_PREFIX) and not claimant.retired:
        return UNREADABLE
    return claimant
