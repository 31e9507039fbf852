"""Event models and their (de)serialisation: the wire contract of SPEC §2 and §5."""

from events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, decode_event
from events.models import (
    CheckpointConfig,
    DeletionCompleted,
    Envelope,
    InputEvent,
    Report,
    RunStarted,
    ValidationResult,
    ValidationSpec,
    WorkerGroupRestart,
)
from events.rejections import Reason, Rejection

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "CheckpointConfig",
    "DeletionCompleted",
    "Envelope",
    "InputEvent",
    "Reason",
    "Rejection",
    "Report",
    "RunStarted",
    "ValidationResult",
    "ValidationSpec",
    "WorkerGroupRestart",
    "decode_event",
]
