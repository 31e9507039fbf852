"""Ray Train (v2) → ckptlog: every `ray.train.report`, validation result and worker-group restart.

    from ray.train import CheckpointConfig, RunConfig
    from ckptlog.integrations.ray import CkptlogCallback

    trainer = DataParallelTrainer(train_fn, scaling_config=..., run_config=RunConfig(
        name="my-run", storage_path="/mnt/ckpts",
        checkpoint_config=CheckpointConfig(num_to_keep=None),  # ckptlog owns deletions (below)
        callbacks=[CkptlogCallback(num_to_keep=3, checkpoint_score_attribute="val/loss",
                                   checkpoint_score_order="min", bootstrap_servers="kafka:9092")]))

What it forwards, from the controller actor, after Ray's own CheckpointManager has seen it:

- `run_started` when the controller starts: the run id (default: `RunConfig.name`), its root
  (the experiment directory Ray writes checkpoints into) and ckptlog's retention config
  (default score attribute/order: Ray's `CheckpointConfig`), including the rules beyond Ray
  (keyword arguments: the fields of ckptlog/events/retention_rules.py, e.g. `keep_every_n_steps`);
- a `report` per `ray.train.report` (rank 0's metrics, the checkpoint's URL, the validation
  request as Ray got it: `True` or a `ValidationTaskConfig`'s fn_kwargs and timeout), tagged
  with the worker group's generation, so reports of a replaced group are refused;
- a `worker_group_restart` for every worker group after the first (generation 1, 2, …);
- `run_finished` when the controller finishes without an error (`finish=True`, the default;
  `finish_keep` chooses what the finished run keeps): a failed run is not finished, so
  restoring it under the same name goes on with the same ckptlog run;
- a resumed run (a new job under the same name) goes on in ckptlog as a new worker group, its
  report ids never colliding with the earlier jobs' (ckptlog/integrations/ray_session.py) — a run
  an earlier job finished is reopened first (`run_reopened`, contract §3) — and Ray
  can load its own snapshot after ckptlog's deletions (ckptlog/integrations/ray_snapshot.py);
  `kept_checkpoints(run_id)` gives ckptlog's kept set as Ray `Checkpoint`s;
- Ray's own validation results (`DataParallelTrainer(validation_config=...)`), as
  `validation_result` events: Ray has no hook for them, so the callback wraps
  `CheckpointManager.update_checkpoints_with_validation_result` in the controller process.

**Who deletes.** Ray's `CheckpointConfig(num_to_keep=N)` makes Ray delete what it evicts;
ckptlog's `num_to_keep` makes the ckptlog processor delete what it evicts, only once that is
durable, never a kept, latest or pending checkpoint. Let exactly one side delete: set Ray's
`num_to_keep=None` and give the retention to this callback (recommended: ckptlog then also
serves the kept set to other jobs and readers, survives the controller, and can preserve
checkpoints beyond Ray's rules), or give ckptlog `num_to_keep=None` to keep Ray's behaviour.

The callback is pickled into the controller actor, so its Kafka producer is created there,
lazily. It uses DeveloperAPI interfaces of `ray.train.v2` (ReportCallback, WorkerGroupCallback,
ControllerCallback): `pip install 'ckptlog[ray]'` pins the tested Ray range.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Unpack

from ckptlog.client.confirm import PROCESSOR_GROUP
from ckptlog.client.connect import EVENTS_TOPIC, STATE_TOPIC, Connection, Topics
from ckptlog.client.dead_letters import DLQ_TOPIC
from ckptlog.client.event_warnings import CHECKPOINTS_TOPIC
from ckptlog.client.sync_clients import Reader, Reporter
from ckptlog.client.views import RunView
from ckptlog.events.retention_rules import rule_config
from ckptlog.events.rule_types import RuleKwargs
from ckptlog.integrations import ray_snapshot
from ckptlog.integrations.outbox import Outbox
from ckptlog.integrations.ray_session import RaySession, RunNotResumable

try:
    from ray.train import Checkpoint
    from ray.train.v2._internal.execution.callback import ControllerCallback, ReportCallback, WorkerGroupCallback
    from ray.train.v2._internal.execution.checkpoint import checkpoint_manager
    from ray.train.v2._internal.execution.checkpoint.checkpoint_manager import CheckpointManager
except ImportError as exc:  # pragma: no cover - exercised only without Ray
    raise ImportError(
        "ckptlog.integrations.ray needs Ray Train v2: pip install 'ckptlog[ray]' (or 'ray[train]')"
    ) from exc

__all__ = ["CkptlogCallback", "RunNotResumable", "checkpoint_url", "fs_url", "kept_checkpoints"]

_SCHEMES = {"local": "", "s3": "s3://", "gcs": "gs://", "hdfs": "hdfs://", "abfs": "abfs://"}
_FORWARDING: list[Callable[[Any, dict[Any, Any]], None]] = []  # validation-result listeners in this process
_STATUSES: dict[str, Literal["VALIDATED", "VALIDATION_FAILED", "VALIDATION_TIMEOUT"]] = {
    "VALIDATED": "VALIDATED",
    "VALIDATION_FAILED": "VALIDATION_FAILED",
    "VALIDATION_TIMEOUT": "VALIDATION_TIMEOUT",
}


def fs_url(path: str, filesystem: Any) -> str:
    """A path on a pyarrow filesystem (what Ray's checkpoints and storage carry) as an fsspec URL."""
    if "://" in path:
        return path
    kind = getattr(filesystem, "type_name", "local") if filesystem is not None else "local"
    if kind not in _SCHEMES:
        raise ValueError(f"Ray filesystem {kind!r} has no fsspec scheme known to ckptlog; use local, s3, gcs or abfs")
    return _SCHEMES[kind] + path.lstrip("/") if _SCHEMES[kind] else path


def checkpoint_url(checkpoint: Any) -> str:
    """`ray.train.Checkpoint` (a path on a pyarrow filesystem) as an fsspec URL ckptlog can delete."""
    return fs_url(str(checkpoint.path), getattr(checkpoint, "filesystem", None))


def validation_body(validation: Any) -> bool | dict[str, Any]:
    """Ray's report validation (`False`, `True` or a ValidationTaskConfig) as ckptlog's."""
    if validation is None or isinstance(validation, bool):
        return bool(validation)
    return {"fn_kwargs": dict(getattr(validation, "fn_kwargs", None) or {}), "timeout_s": validation.timeout_s}


class CkptlogCallback(ControllerCallback, ReportCallback, WorkerGroupCallback):
    """See the module docstring. Construct it where the trainer is built; it does nothing until
    Ray runs it in the controller."""

    def __init__(
        self,
        run_id: str | None = None,
        *,
        num_to_keep: int | None = None,
        checkpoint_score_attribute: str | None = None,
        checkpoint_score_order: str | None = None,
        bootstrap_servers: str | None = None,
        topic: str = EVENTS_TOPIC,
        connection: Connection | None = None,
        max_buffered_reports: int = 1000,
        flush_timeout_s: float = 120.0,
        finish: bool = True,
        finish_keep: Literal["kept", "best"] | None = None,
        resume_timeout_s: float = 30.0,
        state_topic: str = STATE_TOPIC,
        dlq_topic: str = DLQ_TOPIC,
        checkpoints_topic: str = CHECKPOINTS_TOPIC,
        processor_group: str = PROCESSOR_GROUP,
        **rules: Unpack[RuleKwargs],
    ) -> None:
        """`connection`: how the controller reaches Kafka (TLS, SASL: see docs/clients.md); without it
        the controller's own CKPTLOG_* environment, as for every client. While Kafka is unreachable
        up to `max_buffered_reports` events wait (ckptlog.integrations.outbox); more, or events still
        waiting `flush_timeout_s` after the controller finished, fail the job with ReportsUndelivered.
        At the controller's start the callback waits up to `resume_timeout_s` for the processor (group
        `processor_group`) to confirm the run's start, then reads its VIEW from `state_topic`: a resumed
        run goes on as a new worker group (ckptlog/integrations/ray_session.py)."""
        self.run_id, self.topic, self.bootstrap_servers = run_id, topic, bootstrap_servers
        self.resume_timeout_s, self.state_topic, self.processor_group = resume_timeout_s, state_topic, processor_group
        self.dlq_topic, self.checkpoints_topic = dlq_topic, checkpoints_topic
        self.connection, self.max_buffered, self.flush_timeout_s = connection, max_buffered_reports, flush_timeout_s
        self.finish, self.finish_keep = finish, finish_keep
        self.retention: dict[str, Any] = {
            "num_to_keep": num_to_keep,
            "checkpoint_score_attribute": checkpoint_score_attribute,
            "checkpoint_score_order": checkpoint_score_order,
            **rule_config(rules),  # retention beyond Ray (ckptlog/events/retention_rules.py): those set
        }
        self.groups = 0  # worker groups started: the generation is groups - 1
        self._reporter: Reporter | None = None
        self._outbox: Outbox | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_reporter": None, "_outbox": None}  # a producer never travels

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled in the controller, before Ray's CheckpointManager loads its snapshot: when
        ckptlog deletes, let that load drop the checkpoints ckptlog deleted (`reconcile_ray_snapshot`)."""
        self.__dict__.update(state)
        if self.retention.get("num_to_keep") is not None:
            ray_snapshot.OWNS_DELETION.add(True)

    # -- the controller ---------------------------------------------------------------------------

    def after_controller_start(self, train_run_context: Any) -> None:
        """Announce the run: its root (Ray's experiment directory) and retention."""
        run_config = train_run_context.run_config
        storage = run_config.storage_context
        self.run_id = self.run_id or run_config.name or storage.experiment_dir_name
        root = fs_url(storage.experiment_fs_path, storage.storage_filesystem)
        ray_config = run_config.checkpoint_config
        retention = dict(self.retention)
        retention["checkpoint_score_attribute"] = retention["checkpoint_score_attribute"] or getattr(
            ray_config, "checkpoint_score_attribute", None
        )
        retention["checkpoint_score_order"] = (
            retention["checkpoint_score_order"] or getattr(ray_config, "checkpoint_score_order", None) or "max"
        )
        self._reporter = Reporter(
            self.run_id,
            bootstrap_servers=self.bootstrap_servers,
            topic=self.topic,
            connection=self.connection,
            confirm_timeout_s=self.resume_timeout_s,
            processor_group=self.processor_group,
            dlq_topic=self.dlq_topic,
            checkpoints_topic=self.checkpoints_topic,
        )
        self.groups = 0  # a controller counts its own worker groups (the session adds the run's past)
        session = RaySession(self._reporter, self._read_view)
        self._outbox = Outbox(session, self.run_id, self.max_buffered)
        self._outbox.send("start", root, retention)
        _FORWARDING.append(self._validated)

    def _read_view(self) -> RunView | None:
        assert self.run_id is not None
        return _view(self.run_id, self.bootstrap_servers, self.connection, self.state_topic)

    def after_controller_finish(self, result: Any = None) -> None:
        if self._validated in _FORWARDING:
            _FORWARDING.remove(self._validated)
        try:
            if self._outbox is not None:
                if self.finish and getattr(result, "error", None) is None:  # a failed run may be resumed
                    self._outbox.send("finish", self.finish_keep)
                self._outbox.close(self.flush_timeout_s)
        finally:
            if self._reporter is not None:
                self._reporter.close()
            self._reporter = self._outbox = None

    # -- worker groups and reports ----------------------------------------------------------------

    def after_worker_group_start(self, worker_group: Any) -> None:
        """A worker group after the first is a restart: the next generation."""
        self.groups += 1
        if self._outbox is not None:
            self._outbox.send("group_started", self.groups - 1, len(worker_group.get_workers()))

    def after_report(self, training_report: Any, metrics: list[dict[str, Any]]) -> None:
        if self._outbox is None:
            return
        checkpoint = training_report.checkpoint
        path = checkpoint_url(checkpoint) if checkpoint is not None else None
        validation = validation_body(training_report.validation) if path is not None else False
        self._outbox.send("report", max(self.groups - 1, 0), dict(training_report.metrics or {}), path, validation)

    def _validated(self, manager: Any, updates: dict[Any, Any]) -> None:
        """Ray's validation results, as they reach its CheckpointManager."""
        if self._outbox is None:
            return
        for checkpoint, (metrics, status) in updates.items():
            name = _STATUSES.get(getattr(status, "name", str(status)))
            if name is not None:
                self._outbox.send(
                    "validation_result", checkpoint_url(checkpoint), name, metrics if name == "VALIDATED" else {}
                )


def _wrap_validation_results() -> None:
    """Ray applies validation results in `CheckpointManager.update_checkpoints_with_validation_result`
    and offers no hook; wrap it (once per process) so every callback here hears them."""
    original = CheckpointManager.update_checkpoints_with_validation_result
    if getattr(original, "_ckptlog", False):
        return

    def update(self: Any, checkpoint_updates: dict[Any, Any]) -> Any:
        result = original(self, checkpoint_updates)
        for listener in list(_FORWARDING):
            listener(self, checkpoint_updates)
        return result

    update._ckptlog = True  # type: ignore[attr-defined]
    CheckpointManager.update_checkpoints_with_validation_result = update  # type: ignore[method-assign]


def _view(
    run_id: str, bootstrap_servers: str | None, connection: Connection | None, state_topic: str
) -> RunView | None:
    """The run's VIEW on `state_topic` now (the controller's resume check and `kept_checkpoints`)."""
    with Reader(bootstrap_servers=bootstrap_servers, topics=Topics(state=state_topic), connection=connection) as reader:
        return reader.view(run_id)


def kept_checkpoints(
    run_id: str,
    *,
    bootstrap_servers: str | None = None,
    connection: Connection | None = None,
    state_topic: str = STATE_TOPIC,
) -> list[Checkpoint]:
    """ckptlog's kept set of `run_id` (its VIEW: rank order, best last) as Ray `Checkpoint`s: use it
    instead of `Result.best_checkpoints`, which still lists the directories ckptlog deleted."""
    view = _view(run_id, bootstrap_servers, connection, state_topic)
    if view is None:
        raise RunNotResumable(
            f"ckptlog has no VIEW of run {run_id!r} on {state_topic}: is `ckptlog run` running, and is the "
            "run id RunConfig.name (or the callback's run_id)?"
        )
    return [Checkpoint(path=checkpoint.path) for checkpoint in view.checkpoints]


_wrap_validation_results()
ray_snapshot.install(CheckpointManager, getattr(checkpoint_manager, "_exists_at_fs_path", None))
