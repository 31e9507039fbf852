"""Event models and their (de)serialisation: the wire contract of contract §2 and §5.

The names below are the pydantic models (the contract); `decode_event` yields the Structs of
ckptlog/events/decoded.py (`DecodedEvent`), the one shape the fold reads. The run view's model is in
ckptlog/events/view.py, not imported here: `ckptlog fold` would pay for building it at start-up.
"""

from ckptlog.events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, decode_event
from ckptlog.events.decoded import DecodedEvent, InputEvent
from ckptlog.events.models import (
    CheckpointConfig,
    DeletionCompleted,
    Envelope,
    Report,
    RunStarted,
    ValidationResult,
    ValidationSpec,
    WorkerGroupRestart,
)
from ckptlog.events.rejections import Reason, Rejection

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "CheckpointConfig",
    "DecodedEvent",
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
