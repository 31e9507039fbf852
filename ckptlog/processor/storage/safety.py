"""Deletion safety in one place (contract §9): the ordered checks every deletion passes, each a verdict.

A checkpoint path handed to the `Deleter` (ckptlog/processor/storage/deletion.py) is deleted only
if every check, in this order, lets it through; the first that does not decides, with its reason,
and nothing is touched:

1. **confinement** (at submission, `Checks.confinement`): strictly under the run's storage root
   and under `--storage-root`, in a spelling no filesystem resolves elsewhere
   (ckptlog/processor/storage/confinement.py). `Refused`: final.
2. **retired claims** (as its job starts, `Checks.before_removal`): a path at, in or around a root
   whose retired claim (ckptlog/processor/storage/claims.py) is still being written or removed
   (ckptlog/processor/storage/claim_writer.py) waits for it. `Held`: looked at again after HOLD_S.
3. **still owed** (as its job starts, `Checks.before_removal`): the run's current state is asked
   again; a path live again, no longer owed, or of a partition this instance lost is `Dropped`.

Checks 2 and 3 are asked for a whole job at once (`Checks.before_removal_many`, the deleter's
`recheck_many`: one call per job, grouped by run and owner inside), with the same verdict per path
as one path at a time: check 2 first for every path, check 3 only for those it let through.
4. **nesting** (in the walk, `nesting`): another claimant's claim above the run's root, between the
   root and the checkpoint, or anywhere inside the checkpoint. `Refused` (a claim still being
   written: retried).
5. **ownership** (in the walk, `ownership`): the claim at the run's root names another claimant
   (or a finished run, its own id included). `Refused`, as for nesting.

Checks 4 and 5 run inside the walk that removes the path or writes a claim
(ckptlog/processor/storage/tree.py, over a local or remote storage tree), on what the walk itself
opened, so nothing can change between the check and the removal; the local walk never follows a link.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from ckptlog.events.paths import CLAIM_DIR
from ckptlog.processor.storage.claims import CLAIMING, Claimant
from ckptlog.processor.storage.confinement import Confinement

HOLD_S = 0.2
"""How long a deletion waits before it looks again whether its run's retired claim is written."""

Key = tuple[str, str]
"""(run id, checkpoint path URL as submitted)."""

Recheck = Callable[[Key], str | None]
"""Why a deletion must not run now (the path is live again, its partition is no longer owned),
or None to go ahead; asked on the event loop immediately before the deletion."""

RecheckMany = Callable[[Sequence[Key]], Sequence[str | None]]
"""`Recheck` for a job's keys at once (one call per job, not per path): one answer per key, in order."""


@dataclass(frozen=True, slots=True)
class Refused:
    """Must not be done, nothing was touched: final, unless `retry` (the check may pass later)."""

    reason: str
    retry: bool = False


@dataclass(frozen=True, slots=True)
class Held:
    """Not yet (check 2): a retired claim this deletion must meet is still being written or removed."""

    reason: str


@dataclass(frozen=True, slots=True)
class Dropped:
    """Not owed now (check 3): the deletion leaves the deleter untouched; its owner re-drives it."""

    reason: str


Outcome = None | str | Refused
"""What a walk did: None done (deleted, claimed); str a transient error (retried); Refused never."""


class Stop(Exception):
    """A walk ends early with `outcome` (None: what it was after is gone, which is done)."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome)
        self.outcome = outcome


class PendingClaims(Protocol):
    """The retired claims still being written or removed (claim_writer.ClaimWriter)."""

    @property
    def held(self) -> Collection[str]: ...

    def holds(self, url: str) -> bool: ...


class Checks:
    """Checks 1–3 of one deleter (see the module docstring); 4 and 5 run in its walks."""

    def __init__(
        self,
        outer_root: str | None = None,
        claims: PendingClaims | None = None,
        recheck: Recheck | None = None,
        recheck_many: RecheckMany | None = None,
    ) -> None:
        self._confinement = Confinement(outer_root)
        self.confined = self._confinement.check
        """Check 1 as `confinement` asks it, the problem a plain string (None: through): the deleter's
        per-path form, one call and no verdict object per accepted path."""
        self.claims = claims
        if recheck_many is None and recheck is not None:
            recheck_many = partial(_each, recheck)  # check 3 has one form here: per job
        self._recheck_many = recheck_many

    @property
    def outer_key(self) -> str | None:
        """The canonical spelling of `--storage-root` (None: there is none, or it is unsafe)."""
        return self._confinement.outer_key

    def confinement(self, path: str, root: str) -> tuple[Refused | None, str, str]:
        """Check 1, as the path is submitted: the verdict, the path's canonical URL and its root's."""
        problem, url, key = self.confined(path, root)
        return (None if problem is None else Refused(problem)), url, key

    def before_removal(self, key: Key, url: str) -> Held | Dropped | None:
        """Checks 2 and 3, in order, for a path about to be removed (`url`: canonical)."""
        return self.before_removal_many([key], [url])[0]

    def before_removal_many(self, keys: Sequence[Key], urls: Sequence[str]) -> list[Held | Dropped | None]:
        """`before_removal` for each of a job's keys (`urls`: their canonical URLs), the same verdict per
        key: check 2 for each; check 3 for the keys check 2 let through, asked once for them all (nothing
        runs between the answers: the event loop does not switch inside this call)."""
        verdicts: list[Held | Dropped | None] = [None] * len(keys)
        asked: Sequence[int] = range(len(keys))
        claims = self.claims
        if claims is not None and claims.held:
            held = Held("a retired claim at, in or around its root is still being written or removed")
            asked = [at for at, url in enumerate(urls) if not claims.holds(url)]
            for at in set(range(len(keys))).difference(asked):
                verdicts[at] = held
        if not asked:
            return verdicts
        if self._recheck_many is None:
            return verdicts
        whys = self._recheck_many(keys if len(asked) == len(keys) else [keys[at] for at in asked])
        for at, why in zip(asked, whys, strict=True):
            if why is not None:
                verdicts[at] = Dropped(why)
        return verdicts


def _each(recheck: Recheck, keys: Sequence[Key]) -> list[str | None]:
    """A per-key `Recheck` asked for a job's keys, in order."""
    return [recheck(key) for key in keys]


def others(claimants: set[Claimant] | None, me: Claimant | None) -> list[Claimant]:
    """The claimants that are not `me` (every one when `me` is None), in a stable order."""
    if not claimants:
        return []
    found = [c for c in claimants if me is None or not me.owns(c)]
    # one or none needs no sort (asked at every root of every batch); a pre-partition claim's source is
    # None: never compared with a str
    return sorted(found, key=_order) if len(found) > 1 else found


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


def judged(verdict: Refused | None) -> None:
    """A walk's check: it goes on past None, and stops at a refusal."""
    if verdict is not None:
        raise Stop(verdict)


def foreign(where: str, claimants: Sequence[Claimant]) -> Refused:
    """The refusal for meeting `claimants`' claims in `where`."""
    if all(c == CLAIMING for c in claimants):
        return Refused(
            f"{where} holds a claim directory ({CLAIM_DIR}) with no claim in it yet: a run's claim is being "
            "written there (or its writer stopped before it; the owner's next claim completes it); retried",
            retry=True,
        )
    named = ", ".join(map(str, claimants[:3])) + (" and more" if len(claimants) > 3 else "")
    if any(c.retired for c in claimants):
        return Refused(
            f"{where} holds the claim of run {named} ({CLAIM_DIR}): a finished run's checkpoints are "
            "kept for good, and no later run deletes in its root, not even one reusing its id — give a new run "
            "a new id and a directory of its own (contract §3 *Expiry*, §9)"
        )
    return Refused(
        f"{where} holds the claim of run {named} ({CLAIM_DIR}): it is that run's root, and no "
        "deletion reaches into another run's root — give each run a directory of its own (contract §9)"
    )
