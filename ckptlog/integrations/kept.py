"""What a framework integration answers from ckptlog's VIEW: the kept set, the best and the latest.

The trainer integrations (Lightning, Hugging Face, PyTorch, Keras, Orbax) let ckptlog decide what
stays, so their "best checkpoint", "top k" and "last checkpoint" come from the run's VIEW, not from
the framework's memory. `Kept` reads that VIEW for one `TrainerRun` (ckptlog/integrations/session.py):

- **Current for this job.** In the process that reports, a read waits until the VIEW holds every
  report this job sent (`resume_timeout_s` at most): after `saved(...)`, `best()` counts that save.
  A read that finds nothing new to wait for answers from the VIEW it has, without asking Kafka.
- **Never blocking training on an outage.** While the outbox holds events Kafka has not taken
  (ckptlog/integrations/outbox.py), or for `retry_interval_s` after a read failed, the last VIEW read
  stands; a WARNING says so when reads start failing.
- **A report the processor refused** (`ckptlog rejections RUN` shows it) never counts in the VIEW:
  a wait that times out takes the VIEW it got as current, so later reads wait only for later reports.
- **Other processes** (the other ranks, a later `trainer.test(ckpt_path="best")`) read the VIEW as it
  stands, at most once a second; `pin(view)` hands them the reporting process's final VIEW.

`retention_note` is the one INFO line each integration logs at its start where ckptlog's rule is not
its framework's: ckptlog always keeps the latest checkpoint, and on equal scores ranks the later one
better (contract §3).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ckptlog.client.connect import Topics
from ckptlog.client.errors import ClientError
from ckptlog.client.sync_clients import Reader
from ckptlog.client.views import ReportedCheckpoint, RunView
from ckptlog.events.metrics import lookup
from ckptlog.integrations.session import TrainerRun, best, local_path, top
from ckptlog.kafka.errors import KafkaIOError

log = logging.getLogger(__name__)
MAX_AGE_S = 1.0
"""How long a process that does not report keeps a VIEW it read before reading again."""


class Kept:
    """The VIEW of one run as the framework asks for it (see the module docstring)."""

    def __init__(
        self,
        run: TrainerRun,
        clock: Callable[[], float] = time.monotonic,
        open_reader: Callable[[], Reader] | None = None,
    ) -> None:
        self.run, self.clock, self.open_reader = run, clock, open_reader or self._open
        self._view: RunView | None = None
        self._read_at = float("-inf")
        self._counted = 0  # reports of this job the VIEW read last holds (or that will never show)
        self._pinned = False
        self._failed_at = float("-inf")
        self._reader: Reader | None = None

    # -- reading ----------------------------------------------------------------------------------

    def view(self) -> RunView | None:
        """The run's VIEW, current for this job's reports (see the module docstring)."""
        session = self.run.session
        if self._pinned or self.clock() - self._failed_at < self.run.retry_interval_s:
            return self._view  # pinned, or Kafka failed us lately: as the outbox, try again later
        if session is None:
            if self.clock() - self._read_at >= MAX_AGE_S:
                self._read(lambda reader: reader.view(self.run.run_id))
            return self._view
        expected = session.committed_before + session.reports
        if expected > self._counted and not self.run.undelivered:
            self._read(lambda reader: self._wait(reader, expected))
        return self._view

    def _wait(self, reader: Reader, expected: int) -> RunView | None:
        result = reader.wait_for(self.run.run_id, expected, "committed", self.run.resume_timeout_s)
        if not result.reached:
            got = result.view.committed if result.view is not None else 0
            log.warning(
                "event=%s_view_behind run=%r expected=%d committed=%d message=%r",
                self.run.framework,
                self.run.run_id,
                expected,
                got,
                f"the run's VIEW did not count this job's reports within {self.run.resume_timeout_s:g} s: is "
                "`ckptlog run` running? A report it refused never counts (`ckptlog rejections RUN` lists them)",
            )
        self._counted = expected
        return result.view

    def _read(self, read: Callable[[Reader], RunView | None]) -> None:
        try:
            if self._reader is None:
                self._reader = self.open_reader()
            self._view, self._read_at = read(self._reader) or self._view, self.clock()
            self._failed_at = float("-inf")
        except (KafkaIOError, ClientError) as exc:
            self.close()
            if self._failed_at == float("-inf"):
                log.warning(
                    "event=%s_view_unread run=%r message=%r",
                    self.run.framework,
                    self.run.run_id,
                    f"could not read the run's VIEW ({exc}); answering from the last one read, trying again "
                    f"every {self.run.retry_interval_s:g} s",
                )
            self._failed_at = self.clock()

    def current(self) -> bool:
        """Whether `view()` now counts every report this job sent (False while Kafka holds some back)."""
        view, session = self.view(), self.run.session
        if session is None:
            return view is not None
        return (
            view is not None
            and not self.run.undelivered
            and self._counted >= session.committed_before + session.reports
        )

    def _open(self) -> Reader:
        reader = Reader(
            bootstrap_servers=self.run.bootstrap_servers,
            topics=Topics(state=self.run.state_topic),
            connection=self.run.connection,
        )
        reader.start()
        return reader

    def cached(self) -> RunView | None:
        """The VIEW as last read, without reading."""
        return self._view

    def pin(self, view: RunView | None) -> None:
        """Answer from `view` from now on (the reporting process's final VIEW, handed to the others)."""
        self._view, self._pinned = view, True

    def unpin(self) -> None:
        self._pinned, self._read_at = False, float("-inf")

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            try:
                reader.close()
            except Exception:  # the reader's own failure is what close() reports; the VIEW read stays
                log.debug("event=%s_view_reader_close_failed", self.run.framework, exc_info=True)

    # -- what the frameworks ask ------------------------------------------------------------------

    def best(self) -> ReportedCheckpoint | None:
        return best(self.view())

    def top(self, k: int) -> list[ReportedCheckpoint]:
        """The `k` best kept checkpoints, best first (k < 0: every kept one)."""
        return top(self.view(), k)

    def best_path(self) -> str | None:
        checkpoint = self.best()
        return local_path(checkpoint.path) if checkpoint is not None else None

    def latest_path(self) -> str | None:
        view = self.view()
        return local_path(view.latest) if view is not None and view.latest is not None else None

    def paths(self) -> list[str]:
        """Every kept checkpoint's path, in the VIEW's order (best last)."""
        view = self.view()
        return [local_path(c.path) for c in view.checkpoints] if view is not None else []


def score(checkpoint: ReportedCheckpoint, attribute: str | None) -> float | None:
    """The checkpoint's score metric as a number (looked up as the fold does, contract §3), else None."""
    value = lookup(checkpoint.metrics, attribute) if attribute is not None else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def retention_note(run: TrainerRun, framework_rule: str, num_to_keep: int | None, attribute: str | None) -> None:
    """The one INFO line on where ckptlog's retention differs from the framework's own (`framework_rule`,
    e.g. "Lightning's save_top_k=2")."""
    if num_to_keep is None:
        kept = "every checkpoint"
    else:
        kept = f"the {num_to_keep} best by {attribute!r}" if attribute else f"the {num_to_keep} newest"
    log.info(
        "event=%s_retention run=%r message=%r",
        run.framework,
        run.run_id,
        f"ckptlog keeps {kept}, as {framework_rule} would, and also always the latest checkpoint (the "
        "framework drops it when it does not rank); on equal scores the later checkpoint ranks better; "
        "ckptlog deletes the rest once its decision is durable (docs/integrations.md)",
    )
