"""The framework-neutral core every trainer integration shares (Ray's included): one job's ckptlog run.

`Session` is one job's conversation with ckptlog, called in order through the outbox
(ckptlog/integrations/outbox.py, so a Kafka outage buffers instead of killing training):

- **Run start, confirmed.** `run_started` waits for the processor: once it has committed past it,
  it has folded everything the run's earlier jobs sent (one run, one partition, log order), so the
  run's VIEW read next is current. Unconfirmed within `resume_timeout_s`, the job goes on from the
  VIEW as it stands and says so at WARNING.
- **Attempt ids.** Every job draws a fresh attempt id; a report's event id is (run, attempt,
  generation, index), so an outbox retry repeats it (counted once) and a resumed job never collides
  with an earlier job's reports (ckptlog.client.ids.attempt_report_id).
- **Resume at the VIEW.** A run with reports or restarts goes on at the VIEW's generation + 1: the
  job's first worker group sends `worker_group_restart` to it, later ones count on from it.
- **A finished run is reopened.** A run an earlier job finished (its VIEW says `finished`, or the
  processor refuses the start as `run_finished`) is reopened first, confirmed (contract §3 "Reopened
  runs"): its state comes back as it finished and the job goes on after it. A reopen the processor
  refuses (the finished record expired, or the run was forgotten) or does not confirm in time stops
  the job before it trains, saying why. The job's finish is named by the run's epoch (its reopens).

`TrainerRun` wires a Session to a Reporter, an outbox and a Reader for the single-process trainers
(Lightning, Hugging Face, PyTorch, Keras, Orbax): start, report a file, close, and the kept set and
best from the VIEW (`view(wait=True)` waits until the VIEW holds every report this job sent). The
Ray callback uses Session through RaySession (ckptlog/integrations/ray_session.py), which words
its refusals for Ray.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Unpack

from ckptlog.client import ids
from ckptlog.client.confirm import PROCESSOR_GROUP
from ckptlog.client.connect import EVENTS_TOPIC, STATE_TOPIC, Connection, Topics
from ckptlog.client.dead_letters import DLQ_TOPIC
from ckptlog.client.errors import ClientError, EventRejected, NotConfirmed
from ckptlog.client.event_warnings import CHECKPOINTS_TOPIC
from ckptlog.client.sync_clients import Reader, Reporter
from ckptlog.client.views import ReportedCheckpoint, RunView
from ckptlog.events.retention_rules import rule_config
from ckptlog.events.rule_types import RuleKwargs
from ckptlog.integrations.outbox import Outbox

log = logging.getLogger(__name__)
Status = Literal["VALIDATED", "VALIDATION_FAILED", "VALIDATION_TIMEOUT"]


class RunRefused(ClientError):
    """ckptlog refused the run's start, or its reopen (e.g. its finished record expired): the job must
    not train into it."""


@dataclass
class Session:
    """See the module docstring. `read_view()` returns the run's VIEW on the state topic now;
    `framework` names the job in log lines and restart reasons."""

    reporter: Reporter
    read_view: Callable[[], RunView | None]
    framework: str = "trainer"
    attempt: str = field(default_factory=lambda: uuid.uuid4().hex)
    base: int = 0  # the generation of this job's first worker group
    resumed: bool = False
    committed_before: int = 0  # the run's reports before this job (the VIEW at its start)
    epoch: int = 0  # the run's reopens (the VIEW's `reopened`, or this job's own reopen): its finish's id names it
    next_index: dict[int, int] = field(default_factory=dict)
    refusal: ClassVar[type[RunRefused]] = RunRefused

    @property
    def run_id(self) -> str:
        return self.reporter.run_id

    def announce(self, root: str, retention: dict[str, Any]) -> None:
        """Send run_started confirmed (EventRejected: the processor refused it); unconfirmed, go on."""
        try:
            self.reporter.run_started(root, **retention, confirm=True)
        except NotConfirmed as exc:
            log.warning(
                "event=%s_resume_unconfirmed run=%r message=%r",
                self.framework,
                self.run_id,
                f"{exc}; going on from the run's VIEW as it stands: if it is stale, this job's reports may "
                "be refused as stale_generation (ckptlog rejections RUN lists them)",
            )

    def go_on_after(self, view: RunView | None) -> None:
        """A run earlier jobs reported to goes on at its VIEW's generation + 1."""
        if view is not None:
            self.epoch = max(self.epoch, view.reopened or 0)
        if view is not None and (view.committed > 0 or view.generation > 0):
            self.resumed, self.base, self.committed_before = True, view.generation + 1, view.committed
            log.info(
                "event=%s_run_resumed run=%r generation=%d reports_before=%d",
                self.framework,
                self.run_id,
                self.base,
                view.committed,
            )

    def start(self, root: str, retention: dict[str, Any]) -> None:
        """Reopen the run if an earlier job finished it; announce it; go on after its VIEW."""
        view = self.read_view()
        if view is not None and view.finished:  # its final VIEW: reopen it before anything else is sent
            self.reopen(view)
        try:
            self.announce(root, retention)
        except EventRejected as exc:
            if exc.reason != "run_finished":
                raise self.refusal(self.refused(exc)) from exc
            self.reopen(self.read_view())  # finished since the VIEW was read: the answer means it is folded
            self.announce(root, retention)
        view = self.read_view()
        if view is not None and view.finished:  # finished after a start the processor did not confirm
            raise self.refusal(self.finished_message("an earlier job sent run_finished, and it was not reopened"))
        self.go_on_after(view)

    def reopen(self, view: RunView | None) -> None:
        """Reopen the finished run, confirmed (contract §3 "Reopened runs"); refused, or not confirmed
        within the reporter's confirm timeout, the job stops here (`refusal`), saying why."""
        epoch = (view.reopened or 0) + 1 if view is not None else 1
        try:
            self.reporter.reopen(epoch=epoch, confirm=True)
        except EventRejected as exc:
            if exc.reason == "run_not_finished":  # reopened meanwhile (by another job): it goes on
                return
            raise self.refusal(self.finished_message(f"it cannot be reopened: {exc}")) from exc
        except NotConfirmed as exc:
            raise self.refusal(
                f"ckptlog run {self.run_id!r} has finished and its reopen was not confirmed ({exc}): the processor "
                "is down or far behind. The reopen was sent and is applied once the processor catches up; start "
                "this job again then (`ckptlog rejections RUN` says if it was refused)"
            ) from exc
        self.epoch = epoch
        log.info("event=%s_run_reopened run=%r epoch=%d", self.framework, self.run_id, epoch)

    def refused(self, exc: EventRejected) -> str:
        return f"ckptlog refused the start of run {self.run_id!r}, so this job does not train: {exc}"

    def finished_message(self, why: str) -> str:
        return (
            f"ckptlog run {self.run_id!r} has finished ({why}), so this job cannot go on with it: give this job "
            "a new run_id, or pass finish=False to jobs you mean to resume"
        )

    def group_started(self, group: int, num_workers: int, reason: str | None = None) -> None:
        """Worker group `group` of this job (0 = its first) starts: a restart unless a fresh run's first."""
        if group == 0 and not self.resumed:
            return
        why = reason or (f"{self.framework} resumed the run in a new job" if group == 0 else "a new worker group")
        self.reporter.worker_group_restart(num_workers, why, generation=self.base + group)

    def report(
        self, group: int, metrics: Mapping[str, Any], path: str | None, validation: bool | dict[str, Any] = False
    ) -> None:
        generation = self.base + group
        index = self.next_index.get(generation, 0)
        event_id = ids.attempt_report_id(self.run_id, self.attempt, generation, index)
        tagged = generation if (self.resumed or group > 0) else None
        self.reporter.report(dict(metrics), path, validation, tagged, index=index, event_id=event_id)
        self.next_index[generation] = index + 1  # only once sent: a retry repeats the id

    @property
    def reports(self) -> int:
        """Reports this job sent."""
        return sum(self.next_index.values())

    def validation_result(self, path: str, status: Status, metrics: dict[str, Any]) -> None:
        self.reporter.validation_result(path, status, metrics)

    def finish(self, keep: Literal["kept", "best"] | None) -> None:
        self.reporter.finish(keep, epoch=self.epoch)


class RunOptions(RuleKwargs, total=False):
    """The keyword arguments every trainer integration takes besides its framework's: where Kafka and the
    processor are, the outbox's bounds, and ckptlog's retention rules beyond the framework's."""

    topic: str
    state_topic: str
    dlq_topic: str
    checkpoints_topic: str
    processor_group: str
    max_buffered_reports: int
    retry_interval_s: float
    flush_timeout_s: float
    resume_timeout_s: float
    finish: bool
    finish_keep: Literal["kept", "best"] | None


_WHERE = ("topic", "state_topic", "dlq_topic", "checkpoints_topic", "processor_group")
_RULES = frozenset(RuleKwargs.__annotations__)


def check_options(options: Mapping[str, Any], owner: str) -> None:
    """A misspelt keyword fails where the integration is built, naming it."""
    unknown = sorted(set(options) - set(RunOptions.__annotations__) - _RULES)
    if unknown:
        raise TypeError(f"{owner} got unexpected keyword arguments {unknown}; see docs/integrations.md")


def split_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Take ckptlog's keyword arguments (RunOptions and the rules) out of `kwargs`, which keeps the framework's."""
    return {key: kwargs.pop(key) for key in list(kwargs) if key in RunOptions.__annotations__ or key in _RULES}


def read_view(
    run_id: str, bootstrap_servers: str | None, connection: Connection | None, state_topic: str
) -> RunView | None:
    """The run's VIEW on `state_topic` now."""
    with Reader(bootstrap_servers=bootstrap_servers, topics=Topics(state=state_topic), connection=connection) as reader:
        return reader.view(run_id)


class TrainerRun:
    """One single-process training job's ckptlog run (see the module docstring). Only the process that
    reports (the main one) creates it."""

    def __init__(
        self,
        run_id: str,
        framework: str,
        *,
        bootstrap_servers: str | None = None,
        connection: Connection | None = None,
        **options: Unpack[RunOptions],
    ) -> None:
        check_options(options, framework)
        self.run_id, self.framework = run_id, framework
        self.bootstrap_servers, self.connection = bootstrap_servers, connection
        where: dict[str, Any] = {key: options[key] for key in _WHERE if key in options}  # type: ignore[literal-required]
        self.state_topic: str = where.pop("state_topic", STATE_TOPIC)
        self.where = {
            "topic": EVENTS_TOPIC,
            "dlq_topic": DLQ_TOPIC,
            "checkpoints_topic": CHECKPOINTS_TOPIC,
            "processor_group": PROCESSOR_GROUP,
            **where,
        }
        self.max_buffered = options.get("max_buffered_reports", 1000)
        self.retry_interval_s = options.get("retry_interval_s", 30.0)
        self.flush_timeout_s = options.get("flush_timeout_s", 120.0)
        self.resume_timeout_s = options.get("resume_timeout_s", 30.0)
        self.finish, self.finish_keep = options.get("finish", False), options.get("finish_keep")
        self.rules = rule_config({k: v for k, v in options.items() if k in _RULES})
        self.session: Session | None = None
        self._outbox: Outbox | None = None

    def start(self, root: str, retention: dict[str, Any], num_workers: int = 1) -> Session:
        """Announce the run (confirmed) with `retention` and the rules beyond the framework; go on after
        its VIEW when earlier jobs reported to it."""
        reporter = Reporter(
            self.run_id,
            bootstrap_servers=self.bootstrap_servers,
            connection=self.connection,
            confirm_timeout_s=self.resume_timeout_s,
            state_topic=self.state_topic,
            **self.where,
        )
        self.session = Session(reporter, lambda: self.view(), framework=self.framework)
        self._outbox = Outbox(
            self.session, self.run_id, self.max_buffered, self.retry_interval_s, self.framework, self.framework
        )
        try:
            self._outbox.send("start", root, {**retention, **self.rules})
            self._outbox.send("group_started", 0, num_workers)
        except BaseException:
            self.close(finished=False)
            raise
        return self.session

    @property
    def started(self) -> bool:
        return self._outbox is not None

    @property
    def undelivered(self) -> int:
        """Events waiting in the outbox for Kafka."""
        return len(self._outbox.pending) if self._outbox is not None else 0

    def report(self, metrics: Mapping[str, Any], path: str | None) -> None:
        """A checkpoint the framework has finished writing (or metrics alone), through the outbox."""
        if self._outbox is None:
            raise ClientError(f"the {self.framework} run {self.run_id!r} is not started (or already closed)")
        self._outbox.send("report", 0, metrics, path)

    def close(self, finished: bool = True) -> None:
        """Send what waits (ReportsUndelivered after `flush_timeout_s`); `finished` and `finish=True`: the
        run is over in ckptlog too."""
        try:
            if self._outbox is not None:
                if finished and self.finish:
                    self._outbox.send("finish", self.finish_keep)
                self._outbox.close(self.flush_timeout_s)
        finally:
            if self.session is not None:
                self.session.reporter.close()
            self._outbox = None

    def view(self, wait: bool = False, timeout_s: float = 60.0) -> RunView | None:
        """The run's VIEW; `wait`: once it holds every report this job sent (at `timeout_s`, as it is)."""
        with Reader(
            bootstrap_servers=self.bootstrap_servers, topics=Topics(state=self.state_topic), connection=self.connection
        ) as reader:
            if not wait or self.session is None:
                return reader.view(self.run_id)
            expected = self.session.committed_before + self.session.reports
            result = reader.wait_for(self.run_id, expected, "committed", timeout_s)
            if not result.reached:
                log.warning("event=%s_view_behind run=%r expected=%d", self.framework, self.run_id, expected)
            return result.view


def best(view: RunView | None) -> ReportedCheckpoint | None:
    """The VIEW's best kept checkpoint (None before any)."""
    if view is None or view.best is None:
        return None
    return next((c for c in view.checkpoints if c.path == view.best), None)


def top(view: RunView | None, k: int) -> list[ReportedCheckpoint]:
    """The VIEW's `k` best kept checkpoints, best first (k < 0: all of them); the latest counts only by rank."""
    ranked = list(reversed(view.checkpoints)) if view is not None else []
    return ranked if k < 0 else ranked[:k]


def local_path(url: str) -> str:
    """A checkpoint URL of the local filesystem as the path the framework wrote (file:// stripped)."""
    return url.removeprefix("file://")
