"""One Ray controller's conversation with ckptlog: a resumed Ray run goes on in ckptlog (issue 21).

Ray resumes a run when a new job starts under the same `RunConfig.name` and storage path; its
controller, and so this callback, starts from nothing. Three rules keep both jobs' reports:

- **Ids never collide.** Every controller start draws a fresh attempt id; a report's event id is
  (run, attempt, generation, index) (`ckptlog.client.ids.attempt_report_id`). A retry within the attempt
  (the outbox resending after a Kafka blip) repeats the id, so the processor counts it once; a
  resumed job's reports are new facts and are never dropped as duplicates of the first job's.
- **A resumed run is a new worker group.** `start` sends `run_started` confirmed: once the processor
  has committed past it, it has folded everything the run's earlier jobs sent (one run, one
  partition, log order), so the run's VIEW is current. A run with reports or restarts goes on at
  the VIEW's generation + 1: the first worker group sends `worker_group_restart` to it (the fold's
  `worker_group_started` then names the checkpoint it resumes from), later ones count on from it.
  When the processor does not confirm within `resume_timeout_s` (it is down or far behind) the
  controller goes on from the VIEW as it stands and says so at WARNING: if that VIEW is stale, the
  resumed job's reports may be refused as `stale_generation` (loudly, in `ckptlog rejections`),
  never silently merged.
- **A finished run stays finished.** ckptlog refuses events for a run after its `run_finished`;
  a job resuming such a run fails at the controller's start with `RunNotResumable`, before any
  training, and says what to do (`CkptlogCallback(finish=False)` for runs you will resume).

Every method here is called by the outbox (ckptlog/integrations/outbox.py), in order, so a
generation is resolved when its event is sent, after `start` has read the VIEW.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ckptlog.client import ids
from ckptlog.client.errors import ClientError, EventRejected, NotConfirmed
from ckptlog.client.sync_clients import Reporter
from ckptlog.client.views import RunView

log = logging.getLogger(__name__)
Status = Literal["VALIDATED", "VALIDATION_FAILED", "VALIDATION_TIMEOUT"]


class RunNotResumable(ClientError):
    """The run finished in ckptlog (or ckptlog refused its start): a Ray job cannot go on with it."""


@dataclass
class RaySession:
    """See the module docstring. `read_view()` returns the run's VIEW on the state topic now."""

    reporter: Reporter
    read_view: Callable[[], RunView | None]
    attempt: str = field(default_factory=lambda: uuid.uuid4().hex)
    base: int = 0  # the generation of this controller's first worker group
    resumed: bool = False
    next_index: dict[int, int] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.reporter.run_id

    def start(self, root: str, retention: dict[str, Any]) -> None:
        """Announce the run, confirmed; go on after its VIEW when earlier jobs reported to it."""
        try:
            self.reporter.run_started(root, **retention, confirm=True)
        except EventRejected as exc:
            raise RunNotResumable(self._refused(exc)) from exc
        except NotConfirmed as exc:
            log.warning(
                "event=ray_resume_unconfirmed run=%r message=%r",
                self.run_id,
                f"{exc}; going on from the run's VIEW as it stands: if it is stale, this job's reports may "
                "be refused as stale_generation (ckptlog rejections RUN lists them)",
            )
        view = self.read_view()
        if view is not None and view.finished:  # the processor may not have answered: its VIEW does
            raise RunNotResumable(self._finished_message())
        if view is not None and (view.committed > 0 or view.generation > 0):
            self.resumed, self.base = True, view.generation + 1
            log.info(
                "event=ray_run_resumed run=%r generation=%d reports_before=%d",
                self.run_id,
                self.base,
                view.committed,
            )

    def group_started(self, group: int, num_workers: int) -> None:
        """Worker group `group` of this controller (0 = its first) starts."""
        if group == 0 and not self.resumed:
            return
        reason = "Ray Train resumed the run in a new job" if group == 0 else "Ray Train started a new worker group"
        self.reporter.worker_group_restart(num_workers, reason, generation=self.base + group)

    def report(self, group: int, metrics: dict[str, Any], path: str | None, validation: bool | dict[str, Any]) -> None:
        generation = self.base + group
        index = self.next_index.get(generation, 0)
        event_id = ids.attempt_report_id(self.run_id, self.attempt, generation, index)
        tagged = generation if (self.resumed or group > 0) else None
        self.reporter.report(metrics, path, validation, tagged, index=index, event_id=event_id)
        self.next_index[generation] = index + 1  # only once sent: a retry repeats the id

    def validation_result(self, path: str, status: Status, metrics: dict[str, Any]) -> None:
        self.reporter.validation_result(path, status, metrics)

    def finish(self, keep: Literal["kept", "best"] | None) -> None:
        self.reporter.finish(keep)

    def _refused(self, exc: EventRejected) -> str:
        if exc.reason == "run_finished":
            return self._finished_message()
        return f"ckptlog refused the start of run {self.run_id!r}, so this Ray job does not train: {exc}"

    def _finished_message(self) -> str:
        return (
            f"ckptlog run {self.run_id!r} has finished (an earlier job sent run_finished), so this Ray job "
            "cannot go on with it: ckptlog refuses events after a run's finish. Resume it under a new "
            "RunConfig.name, or give jobs you mean to resume CkptlogCallback(finish=False) "
            "(`ckptlog finish RUN` then ends the run when you are done)"
        )
