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
- **A finished run is reopened.** Ray resumes a run under the same name also after its first job
  succeeded, and the callback finished it in ckptlog then. The resuming controller reopens it first
  (confirmed, contract §3 "Reopened runs": its kept set, counts and generation come back as they
  were) and goes on as above. Once its finished record has expired (`--finished-runs-kept`), or for
  a run an operator forgot, the reopen is refused and the job fails at the controller's start with
  `RunNotResumable`, before any training, saying why and what to do (a new `RunConfig.name`).

Every method here is called by the outbox (ckptlog/integrations/outbox.py), in order, so a
generation is resolved when its event is sent, after `start` has read the VIEW.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ckptlog.client.errors import EventRejected
from ckptlog.integrations.session import RunRefused, Session, Status

__all__ = ["RaySession", "RunNotResumable", "Status"]


class RunNotResumable(RunRefused):
    """The run finished in ckptlog and cannot be reopened (or ckptlog refused its start): a Ray job
    cannot go on with it."""


@dataclass
class RaySession(Session):
    """See the module docstring. `read_view()` returns the run's VIEW on the state topic now; the
    run start and reopen, attempt ids, resume and reports are the shared core's
    (ckptlog/integrations/session.py), its refusals worded for Ray."""

    framework: str = "ray"
    refusal: ClassVar[type[RunRefused]] = RunNotResumable

    def group_started(self, group: int, num_workers: int, reason: str | None = None) -> None:
        """Worker group `group` of this controller (0 = its first) starts."""
        reason = "Ray Train resumed the run in a new job" if group == 0 else "Ray Train started a new worker group"
        super().group_started(group, num_workers, reason)

    def refused(self, exc: EventRejected) -> str:
        return f"ckptlog refused the start of run {self.run_id!r}, so this Ray job does not train: {exc}"

    def finished_message(self, why: str) -> str:
        return (
            f"ckptlog run {self.run_id!r} has finished ({why}), so this Ray job cannot go on with it. Resume it "
            "under a new RunConfig.name; for a run you mean to resume long after it ended, give its jobs "
            "CkptlogCallback(finish=False) (`ckptlog finish RUN` then ends the run when you are done)"
        )
