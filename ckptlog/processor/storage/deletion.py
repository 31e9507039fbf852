"""Background deletion of evicted checkpoint directories (contract §3 "Retention", §9).

The fold decides *what* to delete and records it as outstanding state; the deleter carries
deletions out: off the caller's path, idempotently, retried with a deterministic backoff; one that
keeps failing stays outstanding and is logged, never dropped. It enforces its own half of deletion
safety, so that a bug in the fold is caught here: the ordered checks of
ckptlog/processor/storage/safety.py (`Checks` at submission and as a job starts, the walk of
tree.py `remove_all` for the rest). A path any check refuses is final: reported once through
`on_refused`, never touched. The roots' claims are not the deleter's: a `ClaimWriter`
(claim_writer.py) writes them, for the service, and the deleter only asks it, through `Checks`,
which paths wait for a retired claim (`claims=`).

Accepted paths wait in one queue; at most `concurrency` jobs run at a time, each deleting up to
`batch_size` paths in one worker-thread call and reporting every path it confirmed gone in one
`on_done` call. Outcomes stay per path: a failed path is retried alone, after its own backoff.

Per-path log lines are limited per run (deletion_log.py: the first of a window in full, a summary of
the rest), so a flood of refusals or failures costs the loop little; every path still reaches the
callbacks and `counts`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ckptlog.errors import StorageError
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.storage.claims import Claimant
from ckptlog.processor.storage.confinement import confinement_problem
from ckptlog.processor.storage.deletion_log import Clock, DeletionLog
from ckptlog.processor.storage.safety import (
    HOLD_S,
    Checks,
    Held,
    Key,
    Outcome,
    PendingClaims,
    Recheck,
    RecheckMany,
    Refused,
)
from ckptlog.processor.storage.tree import remove_all

log = logging.getLogger(__name__)

__all__ = ["HOLD_S", "Deleter", "DeletionCounts", "DeletionRequest", "Key", "RetryPolicy", "confinement_problem"]

OnDone = Callable[[Sequence[Key]], None]
"""Called with the keys of one job that are confirmed gone."""

OnRefused = Callable[[Sequence[tuple[Key, str]]], None]
"""Called with (key, why) for paths that must never be deleted (nothing was touched): once per
`submit_many` call or job that refused any, its keys grouped by run as they came."""

REFUSED_KEPT = 1000
"""How many of the latest refusals `Deleter.refused` keeps (see there)."""


class DeletionRequest(Protocol):
    """What the fold emits per evicted checkpoint (ckptlog.processor.core.outputs.Deletion)."""

    @property
    def run_id(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def root(self) -> str: ...


@dataclass(slots=True)
class DeletionCounts:
    """Running totals for the metrics (plain ints: the service reads them when it is scraped)."""

    deleted: int = 0  # paths confirmed gone
    failed: int = 0  # failed attempts (each is retried with backoff, then every 30 s)
    refused: int = 0  # paths refused for good (confinement, symlinks, another run's claim): never touched
    dropped: int = 0  # paths the re-check said not to delete (live again, partition no longer owned)


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts per deletion and the wait after each failed one: base, doubling, capped."""

    max_attempts: int = 6
    base_delay: float = 0.1
    max_delay: float = 30.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        return float(min(self.base_delay * 2 ** (attempt - 1), self.max_delay))


class Deleter:
    """Deletes checkpoint paths in the background; see the module docstring for the rules.

    `storage_options` maps a protocol (`"s3"`) to the fsspec options for URLs of that
    protocol, since one processor serves runs on different backends. `claims`: the writer of the
    run roots' claims (claim_writer.ClaimWriter), asked which paths wait for a retired claim
    (None: no claim writer runs beside it, as in `ckptlog fold --apply`: nothing waits). `recheck` is
    check 3 asked per path; `recheck_many` its batch form, asked once per job (used when given).
    `log_clock`: the monotonic clock of the per-run log windows (tests inject one). Use it from the
    event loop: jobs are tasks on the running loop.
    """

    def __init__(
        self,
        *,
        outer_root: str | None = None,
        on_done: OnDone | None = None,
        concurrency: int = 8,
        retry: RetryPolicy = RetryPolicy(),
        storage_options: Mapping[str, Mapping[str, Any]] | None = None,
        batch_size: int = 100,
        recheck: Recheck | None = None,
        recheck_many: RecheckMany | None = None,
        on_refused: OnRefused | None = None,
        claims: PendingClaims | None = None,
        log_clock: Clock = time.monotonic,
    ) -> None:
        if concurrency < 1 or retry.max_attempts < 1 or batch_size < 1:
            raise StorageError(
                f"Deleter for {outer_root or 'any root'} needs concurrency >= 1, max_attempts >= 1 and "
                f"batch_size >= 1 (got {concurrency}, {retry.max_attempts}, {batch_size}); fix the settings"
            )
        self._on_done, self._retry, self._options = on_done, retry, dict(storage_options or {})
        self._on_refused = on_refused
        self._concurrency, self._batch_size = concurrency, batch_size
        # accepted, not confirmed gone -> what to delete. Every such key is in exactly one place:
        # `_ready` (waiting for a job), a running job, `_timers` (backing off) or `_failed` (attempts exhausted)
        self._outstanding: dict[Key, tuple[str, str, Claimant]] = {}  # canonical url and run root, who deletes
        self._ready: list[Key] = []
        self._attempts: dict[Key, int] = {}
        self._timers: dict[Key, asyncio.TimerHandle] = {}
        self._failed: dict[Key, str] = {}
        self._refused: dict[Key, str] = {}  # the latest REFUSED_KEPT, oldest first
        self._log = DeletionLog(log, log_clock)
        self._jobs: set[asyncio.Task[None]] = set()
        self._settled = asyncio.Event()
        self._pump_scheduled = False
        self._closed = False
        self.counts = DeletionCounts()
        self._checks = Checks(outer_root, claims, recheck, recheck_many)

    @property
    def backlog(self) -> int:
        """Accepted deletions not yet confirmed gone (`len(outstanding)` without the copy)."""
        return len(self._outstanding)

    @property
    def failing(self) -> int:
        """Outstanding deletions whose attempts are exhausted (retried by `retry_failed`)."""
        return len(self._failed)

    @property
    def outstanding(self) -> frozenset[Key]:
        """Accepted deletions not yet confirmed gone (queued, in flight, waiting, or failed)."""
        return frozenset(self._outstanding)

    @property
    def failed(self) -> dict[Key, str]:
        """Outstanding deletions whose attempts are exhausted, with the last error."""
        return dict(self._failed)

    @property
    def refused(self) -> dict[Key, str]:
        """The latest `REFUSED_KEPT` paths refused for good, with why (none was touched); oldest first.

        Bounded, since a long-lived processor whose runs' root is misconfigured refuses every
        eviction: the whole record of refusals is elsewhere, each one handed to `on_refused` (the
        processor settles it as the run's `deletion_refused` warning; `ckptlog fold --apply`
        collects them there too) and counted in `counts.refused`. This view is for a look at what
        was refused lately (tests, a debugger): the latest, since a newer refusal says more."""
        return dict(self._refused)

    def submit(self, run_id: str, path: str, root: str, source: str | None = None) -> bool:
        """Queue deleting `path` for `run_id` (as folded by input partition `source`; None: offline)
        without waiting; False when refused.

        A path already queued or in flight is not queued twice; a failed one starts over.
        """
        return self.submit_many([_Request(run_id, path, root)], source) == 1

    def submit_many(self, requests: Iterable[DeletionRequest], source: str | None = None) -> int:
        """`submit` for each request (confinement is still checked per path); how many were accepted."""
        if self._closed:
            raise StorageError(
                "Deleter is closed; cannot delete more paths — submit them to the new Deleter after restart"
            )
        accepted, refused = 0, []
        check, outstanding, failed, ready = self._checks.confined, self._outstanding, self._failed, self._ready
        claimants: dict[str, Claimant] = {}  # one per run (requests come grouped by run), not one per path
        for request in requests:  # hot: one per eviction
            key = (request.run_id, request.path)
            if key in outstanding and key not in failed:  # queued, in a job or backing off: once is enough
                accepted += 1
                continue
            problem, url, root = check(request.path, request.root)  # check 1 (safety.Checks.confinement)
            if problem is not None:
                refused.append((key, problem))
                continue
            accepted += 1
            me = claimants.get(key[0])
            if me is None:
                me = claimants[key[0]] = Claimant(key[0], source)
            outstanding[key] = (url, root, me)
            if failed:
                failed.pop(key, None)
            ready.append(key)
        if accepted:
            self._schedule_pump()
        if refused:
            self._refuse(refused)
        return accepted

    def _refuse(self, refused: Sequence[tuple[Key, str]]) -> None:
        """Paths refused for good, one call's or job's: counted, kept (the latest), logged per run
        (deletion_log.py), then handed to `on_refused` in one call."""
        if not refused:
            return
        self.counts.refused += len(refused)
        kept = self._refused
        for key, problem in refused:
            kept.pop(key, None)  # a path refused again moves to the newest end
            kept[key] = problem
        while len(kept) > REFUSED_KEPT:
            del kept[next(iter(kept))]
        self._log.refused(refused)
        if self._on_refused is not None:
            try:
                self._on_refused(refused)
            except Exception:  # the refusal itself stands; report, carry on
                log.exception("on_refused callback failed for %d refused deletions", len(refused))

    def retry_failed(self) -> int:
        """Start every failed deletion over; returns how many were restarted."""
        failed, self._failed = list(self._failed), {}
        self._ready.extend(failed)
        if failed:
            self._schedule_pump()
        return len(failed)

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait for queued and in-flight deletions; True when every accepted one is confirmed gone."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self._pending():
            self._settled.clear()
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._settled.wait(), remaining)
            except TimeoutError:
                return False
        return not self._outstanding

    async def close(self) -> None:
        """Stop all work; interrupted deletions stay in `outstanding` for the next start. Log summaries
        still owed are written now."""
        self._closed = True
        self._log.close()
        for timer in self._timers.values():
            timer.cancel()
        jobs = list(self._jobs)
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)

    # -- scheduling ----------------------------------------------------------------

    def _schedule_pump(self) -> None:
        """Start jobs on the next loop iteration, so submissions made back to back share jobs."""
        if not self._pump_scheduled:
            self._pump_scheduled = True
            asyncio.get_running_loop().call_soon(self._pump)

    def _pump(self) -> None:
        """Start jobs while slots are free, spreading the queue evenly over them."""
        self._pump_scheduled = False
        while self._ready and len(self._jobs) < self._concurrency and not self._closed:
            free = self._concurrency - len(self._jobs)
            size = min(self._batch_size, -(-len(self._ready) // free))
            keys = self._ready[:size]
            del self._ready[:size]
            job = asyncio.get_running_loop().create_task(self._job(keys))
            self._jobs.add(job)
            job.add_done_callback(self._jobs.discard)
        self._notify()

    def _pending(self) -> bool:
        """Whether any accepted deletion is queued, in a job or backing off (not failed, not confirmed)."""
        return len(self._outstanding) > len(self._failed)

    def _notify(self) -> None:
        if not self._pending():
            self._settled.set()

    async def _job(self, keys: list[Key]) -> None:
        keys = self._cleared(keys)
        items = [self._outstanding[key] for key in keys]
        if items:
            crash_point("deletion.job_start")
        try:
            outer = self._checks.outer_key
            outcomes: list[Outcome] = (
                list(await asyncio.to_thread(remove_all, items, self._options, outer)) if items else []
            )
        except Exception as exc:  # e.g. no thread left at shutdown: every path is retried
            outcomes = [f"{type(exc).__name__}: {exc}"] * len(keys)
        done = keys
        if any(outcomes):  # None is "gone"; the common case is every path gone
            done = [key for key, outcome in zip(keys, outcomes, strict=True) if outcome is None]
            refused = []
            for key, outcome in zip(keys, outcomes, strict=True):
                if isinstance(outcome, Refused) and outcome.retry:
                    self._attempt_failed(key, outcome.reason)
                elif isinstance(outcome, Refused):
                    del self._outstanding[key]
                    self._attempts.pop(key, None)
                    refused.append((key, outcome.reason))
                elif outcome is not None:
                    self._attempt_failed(key, outcome)
            self._refuse(refused)
        if done:
            crash_point("deletion.confirmed")
        self._confirmed(done)
        job = asyncio.current_task()
        if job is not None:
            self._jobs.discard(job)  # this job's slot is free now (its done callback comes later)
        self._pump()

    def _cleared(self, keys: list[Key]) -> list[Key]:
        """The keys checks 2 and 3 (safety.Checks) let through. A held one waits HOLD_S: a later run in
        a finished run's root, or reusing its id, must meet that claim first. A dropped one leaves this
        deleter untouched (its partition's owner re-drives it if it is still owed)."""
        outstanding, go = self._outstanding, []
        verdicts = self._checks.before_removal_many(keys, [outstanding[key][0] for key in keys])
        for key, verdict in zip(keys, verdicts, strict=True):
            if verdict is None:
                go.append(key)
            elif isinstance(verdict, Held):
                self._timers[key] = asyncio.get_running_loop().call_later(HOLD_S, self._requeue, key)
            else:
                del outstanding[key]
                self._attempts.pop(key, None)
                self.counts.dropped += 1
                self._log.dropped(key, verdict.reason)
        return go

    def _attempt_failed(self, key: Key, error: str) -> None:
        self.counts.failed += 1
        attempt = self._attempts[key] = self._attempts.get(key, 0) + 1
        if attempt < self._retry.max_attempts:
            delay = self._retry.delay(attempt)
            self._log.failed(key, error, attempt, self._retry.max_attempts, delay)
            self._timers[key] = asyncio.get_running_loop().call_later(delay, self._requeue, key)
            return
        del self._attempts[key]
        self._failed[key] = error
        self._log.exhausted(key, error, self._retry.max_attempts)

    def _requeue(self, key: Key) -> None:
        del self._timers[key]
        self._ready.append(key)  # still outstanding: only a job confirms a key, and this one is in no job
        self._pump()

    def _confirmed(self, keys: list[Key]) -> None:
        self.counts.deleted += len(keys)
        outstanding, attempts = self._outstanding, self._attempts
        for key in keys:
            del outstanding[key]
        if attempts:
            for key in keys:
                attempts.pop(key, None)
        if not keys or self._on_done is None:
            return
        try:
            self._on_done(keys)
        except Exception:
            log.exception(
                "on_done callback failed for %d deletions (first: %s of run %s)", len(keys), keys[0][1], keys[0][0]
            )


@dataclass(frozen=True, slots=True)
class _Request:
    run_id: str
    path: str
    root: str
