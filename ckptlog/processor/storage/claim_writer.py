"""Writing each run root's claim (contract §9): the claim walk, and the writer that runs it in the background.

The service hands over the roots a committed batch registered (and, once a restored partition
has caught up, every root its state holds); each is claimed once per process, off the event
loop, retried with backoff while storage fails. A claim is written where the root is reached
from `--storage-root` (ckptlog/processor/storage/tree.py `reach_root`, making the directories on the
way): a root reached through a symlink below it is refused, no claim is written outside the
resolved bound, and that run's deletions are refused as well. A root another run claims too, or
one inside or around another run's root, is claimed all the same and logged as an ERROR
(`root_shared`: two runs of different partitions were given nesting roots; the deleter refuses the
deletions that would reach across them). A finished run's retired claim is written only where its
root still is (a root that is gone holds no checkpoint to keep), whoever else claims it: it bars
them all; a reopened run's retired claim is removed once its live claim is in place.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ckptlog.events.paths import root_problem
from ckptlog.processor.storage.claims import Claimant, Shared
from ckptlog.processor.storage.objects import mapped_errors
from ckptlog.processor.storage.safety import Outcome, Refused, Stop, others
from ckptlog.processor.storage.tree import Directory, Options, StorageTree, reach_root, tree_for

log = logging.getLogger(__name__)

Claim = tuple[str, Claimant]
"""(canonical run root, the run and the input partition that folds it)."""


def claim_all(
    items: Sequence[Claim], outer: str | None, options: Options, *, reopened: bool = False
) -> list[Outcome | Shared]:
    """Claim each `(canonical root, claimant)`; one outcome per item. Runs in a worker thread; never
    raises. `reopened`: the claimants are reopened runs' live claimants, whose own retired claims go."""
    outcomes: list[Outcome | Shared] = []
    for root, me in items:
        problem = root_problem(root)  # the fold refuses such roots: a claim never trusts that
        if problem is not None:
            outcomes.append(Refused(f"the run root is unsafe: {problem}"))
        elif outer is not None and root != outer and not root.startswith(outer + "/"):  # never trusted then
            outcomes.append(Refused(f"the run root lies outside --storage-root {outer}: no claim is written there"))
        else:
            try:
                with mapped_errors(root, "claim"):
                    outcomes.append(claim_root(tree_for(root, options), root, me, outer, reopened))
            except Stop as stop:
                outcomes.append(stop.outcome)
            except Exception as exc:  # a backend's own error type: retried
                outcomes.append(f"{type(exc).__name__}: {exc}")
    return outcomes


def claim_root(tree: StorageTree, root: str, me: Claimant, outer: str | None, reopened: bool) -> Outcome | Shared:
    """Write `me`'s claim at `root` (contract §9), then read it back; `reopened`: then the run's own
    retired claim goes, so the root never stands without a claim naming the run. None, or a Shared
    naming who else claims the root, a root above it, or (a new claim: its tree is small then) inside it."""
    assert not (reopened and me.retired), "a reopened run's live claim replaces its retired one"
    try:
        here = reach_root(tree, root, outer, me, create=True, make=not me.retired)
    except Stop as stop:
        if stop.outcome is None and not me.retired:
            return f"the run root {root} could not be made"
        return stop.outcome  # a retired claim where the root is gone: none needed
    try:
        if me.retired and not here.exists():
            return None
        new = here.write_claim(me, root)
        if me.retired:
            return None
        claimants = here.claimants()
        if claimants is None or me not in claimants:
            return f"the claim in {root} vanished right after it was written; claiming it again"
        if reopened:
            refused = here.remove_claim(me._replace(retired=True), root)
            if refused is not None:
                return refused
            claimants = here.claimants()
        return _shared(tree, here, root, me, outer, others(claimants, me), new)
    finally:
        here.close()


def _shared(
    tree: StorageTree, here: Directory, root: str, me: Claimant, outer: str | None, found: list[Claimant], new: bool
) -> Shared | None:
    if found:
        return Shared(f"{root} is claimed by run {', '.join(map(str, found))} too")
    if outer is not None:
        try:
            reach_root(tree, root, outer, me).close()
        except Stop as stop:
            if isinstance(stop.outcome, Refused):
                return Shared(stop.outcome.reason)
    inside = here.claims_below(None, me) if new else None
    return Shared(inside.reason) if inside is not None else None


@dataclass(slots=True)
class ClaimCounts:
    claimed: int = 0  # claims written or found in place
    shared: int = 0  # of those, roots another run claims too, or inside another run's root
    failed: int = 0  # failed attempts (retried)
    refused: int = 0  # roots reached through a symlink below --storage-root (final)


class ClaimWriter:
    """See the module docstring. Use it from the event loop.

    A run's retired claim (ckptlog/processor/storage/claims.py) is written as it retires and removed
    as it is reopened (contract §3 "Reopened runs"), and again as the same run retires later on: for
    each (root, run, source) the newest request wins. Each request names the input offset it was
    folded at (`at`), and one older than a request already made is dropped — the service asks for a
    reopen's removal once its batch committed, by which time the next batch (folded meanwhile) may
    have retired the run again. Only one write or removal of a claim runs at a time; a change of
    mind while it runs is carried out after it. Until the newest is done, `holds` says so for every
    path in, at or around the root: no deletion there meets a claim that is about to change."""

    def __init__(
        self,
        *,
        outer_root: str | None,
        storage_options: Mapping[str, Mapping[str, Any]] | None = None,
        delay: float = 0.5,
        max_delay: float = 30.0,
        batch_size: int = 200,
    ) -> None:
        self._outer, self._options = outer_root, dict(storage_options or {})
        self._delay, self._max_delay, self._batch = delay, max_delay, batch_size
        self._queue: dict[Claim, None] = {}
        self._running: set[Claim] = set()
        self._done: set[Claim] = set()
        self._attempts: dict[Claim, int] = {}
        self._timers: dict[Claim, asyncio.TimerHandle] = {}
        self._want: dict[Claim, bool] = {}  # a retired claim: wanted in place (retired) or gone (reopened)
        self._have: dict[Claim, bool] = {}  # ... and what the last write or removal that succeeded left
        self._at: dict[Claim, int] = {}  # ... and the input offset of the newest request
        self.refused: dict[Claim, str] = {}
        self.held: dict[str, int] = {}  # canonical root -> its retired claims being written or removed
        self._held_sorted: list[str] | None = None
        self.shared: dict[Claim, str] = {}
        self.counts = ClaimCounts()
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed = False

    def claim_many(
        self,
        claims: Iterable[tuple[str, str]],
        source: str | None = None,
        *,
        retired: bool = False,
        reopened: bool = False,
        at: int | None = None,
    ) -> int:
        """Queue each (canonical root, run id) that `source` (the input partition folding it, e.g.
        `events[3]`; None: offline) has not claimed yet in this process; how many were queued.
        `retired`: the runs finished and left the hot state (ckptlog/processor/storage/claims.py); until
        its retired claim is written, `holds` says so for every path in, at or around its root.
        `reopened`: the runs were reopened: their live claims are made sure of and their own retired
        claims removed, held likewise. `at`: the input offset the request was folded at; None: the
        state of a partition that has just caught up, whatever was asked before."""
        if retired or reopened:
            return sum(self._retire((root, Claimant(run_id, source, True)), retired, at) for root, run_id in claims)
        queued = 0
        for root, run_id in claims:
            claim = (root, Claimant(run_id, source))
            if claim in self._done and self._want.get((root, Claimant(run_id, source, True))):
                # a new run of a finished run's id in its root (contract §3 *Expiry*): claimed again, so that
                # it meets the retired claim and is told (root_shared); a replay claims no finished run as live
                self._done.discard(claim)
            if claim in self._done or claim in self.refused or self._pending(claim):
                continue
            self._queue[claim] = None
            queued += 1
        if queued and not self._closed:
            self._start()
        return queued

    def _retire(self, claim: Claim, present: bool, at: int | None) -> bool:
        """Want the retired `claim` in place (`present`) or gone, unless a newer request said otherwise;
        True when that queued a write or a removal."""
        if at is None:  # as a restored partition catches up: its state is what is durable, now
            self._at.pop(claim, None)
        elif at < self._at.get(claim, at):
            return False  # a reopen's removal asked for after a later retirement's write
        else:
            self._at[claim] = at
        self._want[claim] = present
        if self._pending(claim) or claim in self.refused or self._have.get(claim) == present:
            return False  # running or waiting: it does what is wanted when its turn comes
        self._queue[claim] = None
        self._hold(claim[0])
        if not self._closed:
            self._start()
        return True

    def _pending(self, claim: Claim) -> bool:
        return claim in self._queue or claim in self._timers or claim in self._running

    @property
    def pending(self) -> int:
        return len(self._queue) + len(self._timers)

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until nothing is queued or running (claims backing off do not count)."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return not self._queue

    async def close(self) -> None:
        self._closed = True
        for timer in self._timers.values():
            timer.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._idle.clear()
            self._task = asyncio.get_running_loop().create_task(self._work(), name="ckptlog-claims")

    async def _work(self) -> None:
        try:
            while self._queue and not self._closed:
                batch = list(self._queue)[: self._batch]
                for claim in batch:
                    del self._queue[claim]
                # a retired claim is written or removed as wanted now; removing it is the run's live claim's job
                ops = [(claim, self._want.get(claim, True) if claim[1].retired else None) for claim in batch]
                self._running.update(batch)
                try:
                    outcomes = await asyncio.to_thread(self._carry_out, ops)
                finally:
                    self._running.difference_update(batch)
                for (claim, present), outcome in zip(ops, outcomes, strict=True):
                    self._settle(claim, outcome, present)
        finally:
            self._idle.set()

    def _carry_out(self, ops: list[tuple[Claim, bool | None]]) -> list[Outcome | Shared]:
        """In a worker thread: the writes (live and retired claims) and the removals, in two calls."""
        writes = [claim for claim, present in ops if present is not False]
        removals = [(root, me._replace(retired=False)) for (root, me), present in ops if present is False]
        done = iter(claim_all(writes, self._outer, self._options) if writes else [])
        gone = iter(claim_all(removals, self._outer, self._options, reopened=True) if removals else [])
        return [next(gone) if present is False else next(done) for _, present in ops]

    def _settle(self, claim: Claim, outcome: Outcome | Shared, present: bool | None = None) -> None:
        """What a claim's write (`present`: True for a retired claim, None a live one) or a retired
        claim's removal (False) came to: done, refused for good, or failed (retried)."""
        done = outcome is None or isinstance(outcome, Shared)
        final = done or (isinstance(outcome, Refused) and not outcome.retry)
        if present is not None and final and self._retired_settled(claim, done, present):
            return
        if done:
            self._attempts.pop(claim, None)
            if present is False:
                claim = (claim[0], claim[1]._replace(retired=False))  # the reopened run's live claim: in place
            self._claimed(claim, outcome)
        elif final:
            assert isinstance(outcome, Refused)
            self._refused(claim, outcome.reason, present)
        else:
            self._failed(claim, outcome)

    def _retired_settled(self, claim: Claim, done: bool, present: bool) -> bool:
        """A retired claim's write or removal is final: True when the run changed since (reopened, or
        retired again) and it is queued once more; else its root is no longer held."""
        if done:
            self._have[claim] = present
            if self._want.get(claim, present) != present:
                self._queue[claim] = None
                self._start()
                return True
        self._release(claim[0])
        return False

    def _claimed(self, claim: Claim, outcome: Outcome | Shared) -> None:
        self._done.add(claim)
        self.counts.claimed += 1
        if isinstance(outcome, Shared):
            self.shared[claim] = outcome.reason
            self.counts.shared += 1
            log.error(
                "event=root_shared run=%r root=%r: %s; deletions of either run that would reach the other's "
                "are refused — give each run a directory of its own (contract §9)",
                claim[1].run,
                claim[0],
                outcome.reason,
            )

    def _refused(self, claim: Claim, reason: str, present: bool | None) -> None:
        self.refused[claim] = reason
        root, run_id = claim[0], claim[1].run
        if present is False:  # something other than its file stands where the reopened run's retired claim is
            log.error(
                "event=retired_claim_kept run=%r root=%r: %s; the reopened run's deletions there are refused "
                "while it stays",
                run_id,
                root,
                reason,
            )
        elif present:
            # a finished run's root no walk can enter (a link, not a directory, its claim directory not a directory):
            # no deletion reaches what it holds, so there is nothing to guard — and nobody to tell
            log.warning(
                "event=retired_claim_skipped run=%r root=%r: %s; no deletion reaches into it, so it needs no "
                "retired claim",
                run_id,
                root,
                reason,
            )
        else:
            self.counts.refused += 1
            log.error(
                "event=root_claim_refused run=%r root=%r: %s; this run's deletions that would reach another "
                "run's root are refused — give each run a directory of its own",
                run_id,
                root,
                reason,
            )

    def _failed(self, claim: Claim, outcome: Outcome | Shared) -> None:
        self.counts.failed += 1
        attempt = self._attempts[claim] = self._attempts.get(claim, 0) + 1
        delay = min(self._delay * 2 ** (attempt - 1), self._max_delay)
        log.warning(
            "event=root_claim_failed run=%r root=%r attempt=%d: %s; retrying in %.1fs",
            claim[1].run,
            claim[0],
            attempt,
            outcome.reason if isinstance(outcome, Refused) else outcome,
            delay,
        )
        self._timers[claim] = asyncio.get_running_loop().call_later(delay, self._retry, claim)

    def holds(self, url: str) -> bool:
        """Whether a canonical checkpoint URL lies at, in or around a root whose retired claim is
        not written yet: its deletion must wait for that claim (ckptlog/processor/storage/claims.py)."""
        held = self.held
        if url in held:
            return True
        cut = url.rfind("/")
        while cut > 0:  # an ancestor of it is a held root
            if url[:cut] in held:
                return True
            cut = url.rfind("/", 0, cut)
        if self._held_sorted is None:
            self._held_sorted = sorted(held)
        below = self._held_sorted
        at = bisect.bisect_left(below, url + "/")
        return at < len(below) and below[at].startswith(url + "/")  # a held root inside the checkpoint

    def _hold(self, root: str) -> None:
        self.held[root] = self.held.get(root, 0) + 1
        self._held_sorted = None

    def _release(self, root: str) -> None:
        left = self.held.pop(root) - 1
        if left:
            self.held[root] = left
        else:
            self._held_sorted = None

    def _retry(self, claim: Claim) -> None:
        del self._timers[claim]
        if not self._closed:
            self._queue[claim] = None
            self._start()
