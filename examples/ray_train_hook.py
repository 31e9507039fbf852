"""Forward Ray Train reports to ckptlog: a `ray.train.UserCallback` for Ray Train (v2) users.

    from examples.ray_train_hook import ckptlog_callback
    trainer = TorchTrainer(train_fn, run_config=RunConfig(name="my-run", callbacks=[
        ckptlog_callback(run_id="my-run", storage_path="s3://bucket/my-run",
                         num_to_keep=3, checkpoint_score_attribute="val/acc")]))

Ray still saves checkpoints; ckptlog additionally keeps a durable, replayable record of them
that other jobs, evaluators and readers share. Set Ray's own `num_to_keep=None` so that only
one side deletes. Ray is imported only when the callback is built, so this module (and its
`to_report` translation) works without Ray installed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ckptlog import Reporter

# pyarrow filesystem type_name -> fsspec URL scheme (Ray checkpoints carry a pyarrow filesystem)
_SCHEMES = {"local": "", "s3": "s3://", "gcs": "gs://", "hdfs": "hdfs://", "abfs": "abfs://"}


@dataclass(frozen=True)
class ReportCall:
    """One `Reporter.report` call: what a Ray report becomes."""

    metrics: dict[str, Any]
    checkpoint_path: str | None = None
    validation: bool | dict[str, Any] = False


def checkpoint_url(checkpoint: Any) -> str:
    """`ray.train.Checkpoint` (path + pyarrow filesystem) -> an fsspec URL ckptlog can delete."""
    path = str(checkpoint.path)
    if "://" in path:
        return path
    fs = getattr(checkpoint, "filesystem", None)
    kind = getattr(fs, "type_name", "local") if fs is not None else "local"
    if kind not in _SCHEMES:
        raise ValueError(f"checkpoint filesystem {kind!r} has no fsspec scheme here; add it to _SCHEMES")
    return _SCHEMES[kind] + path.lstrip("/") if _SCHEMES[kind] else path


def to_report(
    metrics: Sequence[Mapping[str, Any]] | Mapping[str, Any],
    checkpoint: Any | None,
    validate: bool | dict[str, Any] = False,
) -> ReportCall:
    """Ray hands the callback one metrics dict per worker; rank 0's are the run's, as in Ray's
    CheckpointManager. numpy/torch scalars are fine (the Reporter converts them)."""
    rank0 = dict(metrics) if isinstance(metrics, Mapping) else dict(metrics[0]) if metrics else {}
    path = checkpoint_url(checkpoint) if checkpoint is not None else None
    return ReportCall(rank0, path, validate if path is not None else False)


def forward(reporter: Reporter, call: ReportCall) -> None:
    reporter.report(call.metrics, call.checkpoint_path, call.validation)


def ckptlog_callback(
    run_id: str,
    storage_path: str,
    *,
    num_to_keep: int | None = None,
    checkpoint_score_attribute: str | None = None,
    checkpoint_score_order: str = "max",
    validate: bool | dict[str, Any] = False,
    bootstrap_servers: str | None = None,
) -> Any:
    """Build the Ray callback (imports ray here, so the rest of this module never needs it)."""
    try:
        from ray.train import UserCallback
    except ImportError as exc:
        raise ImportError("ckptlog_callback needs Ray Train v2 (`pip install 'ray[train]'`)") from exc

    class CkptlogCallback(UserCallback):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.reporter = Reporter(run_id, bootstrap_servers=bootstrap_servers)
            self.reporter.run_started(storage_path, num_to_keep, checkpoint_score_attribute, checkpoint_score_order)  # type: ignore[arg-type]

        def after_report(self, run_context: Any, metrics: list[dict[str, Any]], checkpoint: Any | None) -> None:
            forward(self.reporter, to_report(metrics, checkpoint, validate))

    return CkptlogCallback()
