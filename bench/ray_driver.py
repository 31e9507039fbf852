"""Ray Train's own `CheckpointManager` (ray.train.v2, as installed) fed a ckptlog event stream.

Driven the way Ray's controller drives it, one manager per run: `after_report(report, metrics)`
for each report (Ray's ReportCallback hook, which calls `register_checkpoint`) and
`update_checkpoints_with_validation_result({checkpoint: (metrics, status)})` for each validation
result (what Ray's ValidationManager calls). Each run gets a `StorageContext` on a temporary
directory, as Ray's controller gives it one.

What is changed, and why (docs/benchmarks.md repeats it next to the figures):
- deletions are off: `checkpoint_manager.delete_fs_path` is replaced, while a `RayRuns` is open,
  by a recorder (the paths do not exist; `ckptlog fold` does not delete either). The recorded
  paths are what Ray would have deleted, which the differential test compares with ckptlog.
- `persist=False` also replaces the manager's `_write_state_to_storage` (Ray writes its whole
  state as JSON to the storage path after every report and every validation result) by a no-op,
  leaving Ray's in-memory bookkeeping alone: the part comparable to ckptlog's fold, which
  snapshots every N events instead.
- `_notify` stays: it needs a running event loop, so `apply` must run inside one (the caller
  yields to it now and then, so the notification tasks run, as in Ray's controller).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from ray.air.config import CheckpointConfig
from ray.train._checkpoint import Checkpoint
from ray.train.v2._internal.execution.checkpoint import checkpoint_manager as ray_manager
from ray.train.v2._internal.execution.storage import StorageContext
from ray.train.v2._internal.execution.training_report import _TrainingReport
from ray.train.v2.api.reported_checkpoint import ReportedCheckpointStatus

_DELETE = "delete_fs_path"  # the module's deletion function, replaced while a RayRuns is open
START, REPORT, RESULT = "ckptlog.run_started.v1", "ckptlog.report.v1", "ckptlog.validation_result.v1"


@dataclass(slots=True)
class _Run:
    storage: StorageContext
    prefix: str  # the run's experiment path on the storage filesystem, plus "/"
    config: CheckpointConfig
    manager: Any = None  # created by `apply` (timed as Ray's work), not by `decode`
    by_name: dict[str, Checkpoint] = field(default_factory=dict)  # what Ray's ValidationManager holds


Item = tuple[str, str, Any]  # (event type, run id, what the manager gets)


class RayRuns:
    """One Ray CheckpointManager per run; `decode` builds Ray's objects from a line (the work
    Ray's workers and RPC do), `apply` hands them to the manager (the work measured)."""

    def __init__(self, root: Path, *, persist: bool) -> None:
        self.root, self.persist = root, persist
        self.runs: dict[str, _Run] = {}
        self.deleted: list[str] = []  # "run/checkpoint name", in the order Ray would delete them
        self._original: Any = None

    def __enter__(self) -> RayRuns:
        self._original = getattr(ray_manager, _DELETE)
        setattr(ray_manager, _DELETE, self._record_deletion)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        setattr(ray_manager, _DELETE, self._original)

    def _record_deletion(self, fs: Any, fs_path: str) -> None:
        run_id, name = fs_path.rsplit("/", 2)[-2:]
        self.deleted.append(f"{run_id}/{name}")

    def decode(self, line: bytes) -> Item | None:
        """Ray's objects for one CloudEvents line; None for types Ray's manager has no call for."""
        event = json.loads(line)
        kind, run_id, data = event["type"], event["subject"], event["data"]
        if kind == START:
            self._start(run_id, data["checkpoint_config"])
            return None
        run = self.runs[run_id]
        if kind == REPORT:
            name = data["checkpoint"]["path"].rsplit("/", 1)[1]
            checkpoint = run.by_name[name] = Checkpoint(run.prefix + name, filesystem=run.storage.storage_filesystem)
            return kind, run_id, _TrainingReport(checkpoint, data["metrics"], data.get("validation", False))
        if kind == RESULT:
            checkpoint = run.by_name[data["checkpoint_path"].rsplit("/", 1)[1]]
            status = ReportedCheckpointStatus[data["status"]]
            return kind, run_id, {checkpoint: (data.get("metrics", {}), status)}
        return None

    def _start(self, run_id: str, config: dict[str, Any]) -> None:
        storage = StorageContext(storage_path=str(self.root), experiment_dir_name=run_id)
        ray_config = CheckpointConfig(
            num_to_keep=config.get("num_to_keep"),
            checkpoint_score_attribute=config.get("checkpoint_score_attribute"),
            checkpoint_score_order=config.get("checkpoint_score_order", "max"),
        )
        self.runs[run_id] = _Run(storage, storage.experiment_fs_path + "/", ray_config)

    def apply(self, item: Item) -> None:
        kind, run_id, payload = item
        run = self.runs[run_id]
        if run.manager is None:
            run.manager = ray_manager.CheckpointManager(run.config, run.storage)
            if not self.persist:
                run.manager._write_state_to_storage = _no_state_written
        if kind == REPORT:
            run.manager.after_report(payload, [payload.metrics])
        else:
            run.manager.update_checkpoints_with_validation_result(payload)

    def kept(self) -> dict[str, tuple[list[str], str | None]]:
        """Run id -> (kept checkpoint names in Ray's order, worst first; the latest's name)."""
        out: dict[str, tuple[list[str], str | None]] = {}
        for run_id, run in self.runs.items():
            if run.manager is None:
                continue
            names = [_name(result.checkpoint.path) for result in run.manager._checkpoint_results]
            latest = run.manager.latest_checkpoint_result
            out[run_id] = (names, _name(latest.checkpoint.path) if latest is not None else None)
        return out


def _name(path: str) -> str:
    return path.rsplit("/", 1)[1]


def _no_state_written() -> None:
    """Stands in for CheckpointManager._write_state_to_storage when persistence is off."""
