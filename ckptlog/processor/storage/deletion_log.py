"""The deleter's per-path log lines (`deletion_refused`, `deletion_failed`, `deletion_exhausted`,
`deletion_dropped`), limited per run so that a flood costs little and says everything.

A misconfigured root (or one another deployment's run claims) makes the deleter refuse *every*
eviction of a run: at 1,000 evictions/s, one formatted, redacted ERROR line per path took a quarter
of the event loop and said nothing new after the first. The scheme, per event kind and run:

- the first path of a window (`WINDOW_S`, on the monotonic clock: this is the shell, not the fold)
  is logged in full by the caller, as before: run, path, why, what to do;
- the rest of that window's paths are only counted, with the last path and its reason;
- when the window has passed (a loop timer, or the next path of any run, whichever comes first)
  or at `close`, one summary line per run says how many more there were, the last path and why.

So a run writes at most two lines a window however many paths it has, and a run whose
trouble is new (or came back after a quiet window) always gets its full line at once. Counting is
per call: the deleter hands a call's or a job's paths of one run (they come grouped by run) in
one `note`, and one call logs at most one full line per run. Nothing is lost by logging less:
every path still reaches the deleter's callbacks (`on_refused`: the run's `deletion_refused`
warning, contract §9) and its counts (metrics). The state is one entry per run with a line in the
last window, dropped when its window passes.

The same holds for the deleter's other per-path lines, which flood the same way (a storage outage
fails every eviction, up to `max_attempts` times each; a lost partition drops every owed path of its
runs): each kind is limited on its own, so a run's first failure still shows next to its refusals.
`DeletionLog` writes all four; their wording lives only here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby

WINDOW_S = 60.0
"""Seconds after a run's full line during which its further paths of the same kind are only counted."""

Clock = Callable[[], float]


@dataclass(slots=True)
class _Window:
    opened: float
    more: int = 0  # paths counted, not logged, since the full line
    last_path: str = ""
    last_why: str = ""


class PerRunLog:
    """The first path per run and window, and a summary of the rest (see the module docstring).

    `event` names the summary line (`event={event}_summary`), `what` says what happened to each
    path ("refused"), `advice` what to do about it; `level` is the summary's log level.
    """

    def __init__(
        self,
        log: logging.Logger,
        level: int,
        event: str,
        what: str,
        advice: str,
        clock: Clock = time.monotonic,
        window_s: float = WINDOW_S,
    ) -> None:
        self._log, self._level, self._clock, self._window_s = log, level, clock, window_s
        self._format = (
            f"event={event}_summary run=%r more=%d path=%r window_s=%g: %d more paths of this run were {what} "
            f"since its last full line (not logged one by one); the last: %s" + (f"; {advice}" if advice else "")
        )
        self._windows: dict[str, _Window] = {}  # in the order they opened: the first is the oldest
        self._timer: asyncio.TimerHandle | None = None

    @property
    def open_windows(self) -> int:
        """Runs with a full line in the last window (the state this keeps)."""
        return len(self._windows)

    def note(self, run_id: str, paths: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
        """Count one call's (path, why) pairs of `run_id`; the one pair to log in full now, or None
        when the run's window is open (they are summarized when it passes)."""
        if not paths:
            return None
        now = self._clock()
        windows = self._windows
        if windows and now - next(iter(windows.values())).opened >= self._window_s:
            self.flush_due()
        window = windows.get(run_id)
        if window is None:
            windows[run_id] = window = _Window(now)
            first, rest = paths[0], paths[1:]
        else:
            first, rest = None, paths
        if rest:
            window.more += len(rest)
            window.last_path, window.last_why = rest[-1]
            self._arm()
        return first

    def flush_due(self) -> None:
        """Write the summary of every run whose window has passed, and forget those windows."""
        self._timer = None
        now, windows = self._clock(), self._windows
        while windows:
            run_id, window = next(iter(windows.items()))
            if now - window.opened < self._window_s:
                break
            del windows[run_id]
            self._summarize(run_id, window)
        self._arm()

    def close(self) -> None:
        """Write every summary owed now, whatever its window (the deleter is closing)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        windows, self._windows = self._windows, {}
        for run_id, window in windows.items():
            self._summarize(run_id, window)

    def _summarize(self, run_id: str, window: _Window) -> None:
        if window.more:
            self._log.log(
                self._level,
                self._format,
                run_id,
                window.more,
                window.last_path,
                self._window_s,
                window.more,
                window.last_why,
            )

    def _arm(self) -> None:
        """Have the loop flush when the oldest window passes, if a summary is owed and a loop runs
        (without one, as in a one-shot command, the next `note` or `close` flushes)."""
        if self._timer is not None or not any(w.more for w in self._windows.values()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        oldest = next(iter(self._windows.values())).opened
        self._timer = loop.call_later(max(oldest + self._window_s - self._clock(), 0.01), self.flush_due)


Key = tuple[str, str]  # (run id, path), as safety.Key


def _run(item: tuple[Key, str]) -> str:
    return item[0][0]


class DeletionLog:
    """The deleter's log lines, one `PerRunLog` per kind (see the module docstring); `clock`: tests'."""

    def __init__(self, log: logging.Logger, clock: Clock = time.monotonic, window_s: float = WINDOW_S) -> None:
        self._log = log
        self._refused = PerRunLog(log, logging.ERROR, "deletion_refused", "refused", _REFUSED_ADVICE, clock, window_s)
        self._failed = PerRunLog(
            log, logging.WARNING, "deletion_failed", "failed to delete (each retried)", "", clock, window_s
        )
        self._exhausted = PerRunLog(
            log,
            logging.ERROR,
            "deletion_exhausted",
            "not deleted after every attempt",
            _EXHAUSTED_ADVICE,
            clock,
            window_s,
        )
        self._dropped = PerRunLog(
            log, logging.WARNING, "deletion_dropped", "dropped by the re-check", "", clock, window_s
        )

    def refused(self, refused: Iterable[tuple[Key, str]]) -> None:
        """Paths refused for good (grouped by run, as calls and jobs hand them)."""
        for run_id, group in groupby(refused, _run):
            first = self._refused.note(run_id, [(key[1], why) for key, why in group])
            if first is not None:
                self._log.error(
                    "event=deletion_refused run=%r path=%r: refusing to delete it: %s; %s",
                    run_id,
                    first[0],
                    first[1],
                    _REFUSED_ADVICE,
                )

    def failed(self, key: Key, error: str, attempt: int, attempts: int, delay: float) -> None:
        """One failed attempt at `key`, retried after `delay` seconds."""
        if self._failed.note(key[0], [(key[1], error)]) is not None:
            self._log.warning(
                "event=deletion_failed run=%r path=%r: deleting it failed (attempt %d of %d): %s; retrying in %.2fs",
                key[0],
                key[1],
                attempt,
                attempts,
                error,
                delay,
            )

    def exhausted(self, key: Key, error: str, attempts: int) -> None:
        """`key` failed its last attempt; it stays outstanding."""
        if self._exhausted.note(key[0], [(key[1], error)]) is not None:
            self._log.error(
                "event=deletion_exhausted run=%r path=%r: could not delete it after %d attempts: %s; %s",
                key[0],
                key[1],
                attempts,
                error,
                _EXHAUSTED_ADVICE,
            )

    def dropped(self, key: Key, reason: str) -> None:
        """The re-check said not to delete `key` (contract §9)."""
        if self._dropped.note(key[0], [(key[1], reason)]) is not None:
            self._log.warning("event=deletion_dropped run=%r path=%r: not deleting it: %s", key[0], key[1], reason)

    def close(self) -> None:
        """Write every summary owed (the deleter is closing)."""
        for kind in (self._refused, self._failed, self._exhausted, self._dropped):
            kind.close()

    @property
    def open_windows(self) -> int:
        """Runs and kinds with a window open (the state kept; tests)."""
        return sum(k.open_windows for k in (self._refused, self._failed, self._exhausted, self._dropped))


_REFUSED_ADVICE = "nothing was deleted — fix the checkpoint path or the run's storage root"
_EXHAUSTED_ADVICE = "it stays outstanding — resubmit it or call retry_failed()"
