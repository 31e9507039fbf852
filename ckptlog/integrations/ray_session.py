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

from dataclasses import dataclass
from typing import Any

from ckptlog.client.errors import ClientError, EventRejected
from ckptlog.integrations.session import Session, Status

__all__ = ["RaySession", "RunNotResumable", "Status"]


class RunNotResumable(ClientError):
    """The run finished in ckptlog (or ckptlog refused its start): a Ray job cannot go on with it."""


@dataclass
class RaySession(Session):
    """See the module docstring. `read_view()` returns the run's VIEW on the state topic now; the
    run start, attempt ids, resume and reports are the shared core's (ckptlog/integrations/session.py)."""

    framework: str = "ray"

    def start(self, root: str, retention: dict[str, Any]) -> None:
        """Announce the run, confirmed; go on after its VIEW when earlier jobs reported to it."""
        try:
            self.announce(root, retention)
        except EventRejected as exc:
            raise RunNotResumable(self._refused(exc)) from exc
        view = self.read_view()
        if view is not None and view.finished:  # the processor may not have answered: its VIEW does
            raise RunNotResumable(self._finished_message())
        self.go_on_after(view)

    def group_started(self, group: int, num_workers: int, reason: str | None = None) -> None:
        """Worker group `group` of this controller (0 = its first) starts."""
        reason = "Ray Train resumed the run in a new job" if group == 0 else "Ray Train started a new worker group"
        super().group_started(group, num_workers, reason)

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
