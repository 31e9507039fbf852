"""ckptlog's client library: report from training jobs, validate checkpoints, read the state.

    from ckptlog import Reporter, AsyncReporter, Evaluator, Reader, SyncReader

See docs/clients.md.
"""

from ckptlog.connect import Topics
from ckptlog.dead_letters import DeadLetter
from ckptlog.errors import (
    ClientClosed,
    ClientError,
    EventRejected,
    FunctionLoadError,
    InvalidEvent,
    NoKafkaConfigured,
    NotConfirmed,
    ReportsUndelivered,
)
from ckptlog.evaluator import Evaluator
from ckptlog.event_warnings import EventWarning
from ckptlog.invoke import Outcome
from ckptlog.reader import Reader, WaitResult
from ckptlog.reporter import AsyncReporter, SentEvent
from ckptlog.sync_clients import Reporter, SyncReader
from ckptlog.views import ReportedCheckpoint, RunView
from events.codec import DecodeLimits
from events.state import Problem
from processor.errors import CkptlogError, ConfigError
from processor.kafka.connection import KafkaConnection
from processor.kafka.errors import KafkaIOError
from processor.kafka.settings import ConnectionSettings

__all__ = [
    "AsyncReporter",
    "CkptlogError",
    "ClientClosed",
    "ClientError",
    "ConfigError",
    "ConnectionSettings",
    "DeadLetter",
    "DecodeLimits",
    "Evaluator",
    "EventRejected",
    "EventWarning",
    "FunctionLoadError",
    "InvalidEvent",
    "KafkaConnection",
    "KafkaIOError",
    "NoKafkaConfigured",
    "NotConfirmed",
    "Outcome",
    "Problem",
    "Reader",
    "ReportedCheckpoint",
    "Reporter",
    "ReportsUndelivered",
    "RunView",
    "SentEvent",
    "SyncReader",
    "Topics",
    "WaitResult",
]
