"""The default topic names (contract §1): one place, read by the processor's settings and by the
client library (both sides may import ckptlog/events/)."""

from __future__ import annotations

INPUT = "ckptlog.events"
CHECKPOINTS = "ckptlog.checkpoints"
VALIDATIONS = "ckptlog.validations"
WATERMARKS = "ckptlog.watermarks"
STATE = "ckptlog.state"
DLQ = "ckptlog.dlq"
