"""Output events (contract §5): their data models and the envelope that gives each a replay-stable id.

The fold produces `(type, data)` pairs; `events.envelope` wraps one in CloudEvents with an id
derived from the input coordinates (topic, partition, offset, sequence), so replaying the
same log re-emits the very same ids and consumers can deduplicate on them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from events.envelope import PROCESSOR_SOURCE, encode_json, envelope, output_id
from events.models import RunId, Status, TerminalStatus

__all__ = [  # the envelope and its encoder live in events.envelope; re-exported for readers of outputs
    "OUTPUT_MODELS",
    "PROCESSOR_SOURCE",
    "CheckpointEvicted",
    "CheckpointRegistered",
    "CheckpointStatusChanged",
    "CheckpointsDeleted",
    "CheckpointsMissing",
    "OutputEnvelope",
    "ValidationRequested",
    "Warning",
    "Watermark",
    "WorkerGroupStarted",
    "encode_json",
    "envelope",
    "output_id",
]

_OUT = ConfigDict(extra="allow", frozen=True)


class CheckpointRegistered(BaseModel):
    model_config = _OUT
    checkpoint_path: str
    report_index: int
    metrics: dict[str, Any]
    status: Status


class ValidationRequested(BaseModel):
    model_config = _OUT
    checkpoint_path: str
    report_index: int
    fn_kwargs: dict[str, Any]
    timeout_s: float | None


class CheckpointStatusChanged(BaseModel):
    model_config = _OUT
    checkpoint_path: str
    report_index: int
    status: TerminalStatus
    previous_status: Status
    metrics: dict[str, Any]
    error: str | None = None


class CheckpointEvicted(BaseModel):
    model_config = _OUT
    checkpoint_path: str
    report_index: int


class CheckpointsDeleted(BaseModel):
    """Evicted checkpoints confirmed gone from storage: one event per confirmation batch of a run."""

    model_config = _OUT
    checkpoint_paths: list[str]


class Watermark(BaseModel):
    model_config = _OUT
    committed: int
    validated: int
    generation: int
    index_in_generation: int


class WorkerGroupStarted(BaseModel):
    """A new generation of workers: what Ray hands each new worker. `num_workers` is null when a
    newer generation's report started it before the controller's restart event arrived."""

    model_config = _OUT
    generation: int
    report_count: int
    latest_checkpoint_path: str | None
    num_workers: int | None


class Warning(BaseModel):
    model_config = _OUT
    code: str
    message: str
    checkpoint_path: str | None = None


class CheckpointsMissing(BaseModel):
    """After a restore, kept checkpoints of this run were not found in storage."""

    model_config = _OUT
    missing: list[str]
    message: str


OUTPUT_MODELS: dict[str, type[BaseModel]] = {
    "checkpoint_registered": CheckpointRegistered,
    "validation_requested": ValidationRequested,
    "checkpoint_status_changed": CheckpointStatusChanged,
    "checkpoint_evicted": CheckpointEvicted,
    "checkpoints_deleted": CheckpointsDeleted,
    "watermark": Watermark,
    "worker_group_started": WorkerGroupStarted,
    "warning": Warning,
    "checkpoints_missing": CheckpointsMissing,
}


class OutputEnvelope(BaseModel):
    """How every output is read back (evaluators, readers, tests)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    specversion: Literal["1.0"]
    id: str
    source: str
    type: str
    subject: RunId
    datacontenttype: Literal["application/json"] = "application/json"
    data: dict[str, Any]

    @property
    def name(self) -> str:
        """`ckptlog.watermark.v1` -> `watermark`."""
        return self.type.split(".")[1]
