"""Output events (contract §5): their data models and the envelope that gives each a replay-stable id.

The fold produces `(type, data)` pairs; `ckptlog.events.envelope` wraps one in CloudEvents with an id
derived from the input coordinates (topic, partition, offset, sequence), so replaying the
same log re-emits the very same ids and consumers can deduplicate on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ckptlog.events.envelope import PROCESSOR_SOURCE, encode_json, envelope, output_id
from ckptlog.events.models import RunId, Status, TerminalStatus
from ckptlog.events.rule_types import Preserved

__all__ = [  # the envelope and its encoder live in ckptlog.events.envelope; re-exported for readers of outputs
    "CHECKPOINTS_DELETED",
    "CHECKPOINTS_MISSING",
    "CHECKPOINT_EVICTED",
    "CHECKPOINT_REGISTERED",
    "CHECKPOINT_STATUS_CHANGED",
    "OUTPUTS",
    "OUTPUT_KINDS",
    "OUTPUT_MODELS",
    "PROCESSOR_SOURCE",
    "VALIDATION_REQUESTED",
    "WARNING",
    "WATERMARK",
    "WORKER_GROUP_STARTED",
    "CheckpointEvicted",
    "CheckpointRegistered",
    "CheckpointStatusChanged",
    "CheckpointsDeleted",
    "CheckpointsMissing",
    "EvictionReason",
    "OutputEnvelope",
    "OutputKind",
    "Topic",
    "ValidationRequested",
    "Warning",
    "Watermark",
    "WorkerGroupStarted",
    "encode_json",
    "envelope",
    "output_id",
]

_OUT = ConfigDict(extra="allow", frozen=True, defer_build=True)  # built when first used: the fold imports the table


class CheckpointRegistered(BaseModel):
    """`preserved`: the rule that preserved the checkpoint for good (contract §3), absent otherwise."""

    model_config = _OUT
    checkpoint_path: str
    report_index: int
    metrics: dict[str, Any]
    status: Status
    preserved: Preserved | None = None


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


class EvictionReason(BaseModel):
    """Why a checkpoint was evicted (contract §5): the rule, the order it ranked by, its rank then
    (1 = best of the checkpoints that count), the `num_to_keep` it fell outside of, its score and
    the score of the worst checkpoint the rule keeps (null without one), and why no exemption held."""

    model_config = _OUT
    rule: Literal["num_to_keep", "best"]
    order: Literal["score", "report"]
    rank: int
    num_to_keep: int
    score: float | None
    worst_kept_score: float | None
    not_exempt: list[Literal["not_latest", "not_pending", "not_preserved"]]


class CheckpointEvicted(BaseModel):
    """v2: `reason` added (required); v1 had only the path and report index."""

    model_config = _OUT
    checkpoint_path: str
    report_index: int
    reason: EvictionReason


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


Topic = Literal["checkpoints", "validations", "watermarks"]
"""The output topics, by the name of their `TopicNames` field (ckptlog/processor/service/records.py)."""


@dataclass(frozen=True, slots=True)
class OutputKind:
    """One output event kind: its short name (what the fold's `Output` carries), the model of its
    `data` (the published schema, schemas/output/), the topic it is routed to and its version (the
    envelope's `type` is `ckptlog.{name}.v{version}`). Routing, the envelope, schema generation and
    the metric labels all read `OUTPUT_KINDS`, so a new output is one row here and its model."""

    name: str
    model: type[BaseModel]
    topic: Topic
    version: int = 1

    @property
    def type(self) -> str:
        """The CloudEvents type, e.g. `ckptlog.watermark.v1`."""
        return f"ckptlog.{self.name}.v{self.version}"


CHECKPOINT_REGISTERED = OutputKind("checkpoint_registered", CheckpointRegistered, "checkpoints")
VALIDATION_REQUESTED = OutputKind("validation_requested", ValidationRequested, "validations")
CHECKPOINT_STATUS_CHANGED = OutputKind("checkpoint_status_changed", CheckpointStatusChanged, "checkpoints")
CHECKPOINT_EVICTED = OutputKind("checkpoint_evicted", CheckpointEvicted, "checkpoints", version=2)
CHECKPOINTS_DELETED = OutputKind("checkpoints_deleted", CheckpointsDeleted, "checkpoints")
WATERMARK = OutputKind("watermark", Watermark, "watermarks")
WORKER_GROUP_STARTED = OutputKind("worker_group_started", WorkerGroupStarted, "checkpoints")
WARNING = OutputKind("warning", Warning, "checkpoints")
CHECKPOINTS_MISSING = OutputKind("checkpoints_missing", CheckpointsMissing, "checkpoints")  # made by the service

OUTPUT_KINDS: tuple[OutputKind, ...] = (
    CHECKPOINT_REGISTERED,
    VALIDATION_REQUESTED,
    CHECKPOINT_STATUS_CHANGED,
    CHECKPOINT_EVICTED,
    CHECKPOINTS_DELETED,
    WATERMARK,
    WORKER_GROUP_STARTED,
    WARNING,
    CHECKPOINTS_MISSING,
)
"""The output table: every output event kind, in the order the schemas list them."""
OUTPUTS: dict[str, OutputKind] = {kind.name: kind for kind in OUTPUT_KINDS}
"""Short name (`watermark`) -> its kind."""
OUTPUT_MODELS: dict[str, type[BaseModel]] = {kind.name: kind.model for kind in OUTPUT_KINDS}
"""Short name -> the model of its `data` (derived from the table, for readers)."""


class OutputEnvelope(BaseModel):
    """How every output is read back (evaluators, readers, tests)."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)
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
