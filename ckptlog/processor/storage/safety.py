"""Deletion safety's verdicts (contract §9): what a refusal is, and the claim checks of the walks.

A checkpoint path handed to the `Deleter` (ckptlog/processor/storage/deletion.py) is deleted only
if every check, in this order, lets it through; the first that does not decides, with its reason,
and nothing is touched:

1. **confinement** (at submission): strictly under the run's storage root and under
   `--storage-root`, in a spelling no filesystem resolves elsewhere
   (ckptlog/processor/storage/confinement.py). `Refused`: final.
2. **retired claims** (as its job starts, in the Deleter): a path at, in or around a root whose
   retired claim (ckptlog/processor/storage/claims.py) is still being written waits for it.
3. **still owed** (as its job starts, the Deleter's `recheck`): a path live again, no longer owed,
   or of a partition this instance lost is dropped.
4. **nesting** (in the walk, `nesting`): another claimant's claim above the run's root, between the
   root and the checkpoint, or anywhere inside the checkpoint. `Refused` (a claim still being
   written: retried).
5. **ownership** (in the walk, `ownership`): the claim at the run's root names another claimant
   (or a finished run, its own id included). `Refused`, as for nesting.

Checks 4 and 5 are this module's; they run inside the walks that remove a path or write a claim
(ckptlog/processor/storage/removal.py, markers.py, remote_markers.py), on what the walk itself
opened, so nothing can change between the check and the removal; the local walk never follows a link.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ckptlog.events.paths import MARKER
from ckptlog.processor.storage.claims import CLAIMING, Claimant


@dataclass(frozen=True, slots=True)
class Refused:
    """Must not be done, nothing was touched: final, unless `retry` (the check may pass later)."""

    reason: str
    retry: bool = False


Outcome = None | str | Refused
"""What a walk did: None done (deleted, claimed); str a transient error (retried); Refused never."""


def others(claimants: set[Claimant] | None, me: Claimant | None) -> list[Claimant]:
    """The claimants that are not `me` (every one when `me` is None), in a stable order."""
    found = (c for c in claimants or () if me is None or not me.owns(c))
    return sorted(found, key=_order)  # a pre-partition claim's source is None: never compared with a str


def _order(claimant: Claimant) -> tuple[str, bool, str, bool]:
    return claimant.run, claimant.source is not None, claimant.source or "", claimant.retired


def nesting(where: str, claimants: set[Claimant] | None, me: Claimant | None) -> Refused | None:
    """Check 4: the claims found in `where` (a directory above the root, between it and the
    checkpoint, or inside the checkpoint) name nobody but `me` (None: nobody at all)."""
    found = others(claimants, me)
    return foreign(where, found) if found else None


def ownership(root: str, claimants: set[Claimant] | None, me: Claimant) -> Refused | None:
    """Check 5: the claims at the run's root name nobody but `me`."""
    return nesting(root, claimants, me)


def foreign(where: str, claimants: Sequence[Claimant]) -> Refused:
    """The refusal for meeting `claimants`' claims in `where`."""
    if all(c == CLAIMING for c in claimants):
        return Refused(
            f"{where} holds an ownership marker ({MARKER}) with no claim in it yet: a run's claim is being "
            "written there (or its writer stopped before it; the owner's next claim completes it); retried",
            retry=True,
        )
    named = ", ".join(map(str, claimants[:3])) + (" and more" if len(claimants) > 3 else "")
    if any(c.retired for c in claimants):
        return Refused(
            f"{where} holds the ownership marker of run {named} ({MARKER}): a finished run's checkpoints are "
            "kept for good, and no later run deletes in its root, not even one reusing its id — give a new run "
            "a new id and a directory of its own (contract §3 *Expiry*, §9)"
        )
    return Refused(
        f"{where} holds the ownership marker of run {named} ({MARKER}): it is that run's root, and no "
        "deletion reaches into another run's root — give each run a directory of its own (contract §9)"
    )
