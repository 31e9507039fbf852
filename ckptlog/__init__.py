"""ckptlog's client library: report from training jobs, validate checkpoints, read the state.

    from ckptlog import Reporter, AsyncReporter, Reader, AsyncReader, Evaluator, AsyncEvaluator

One naming scheme, httpx's: the plain name is synchronous, its `Async` twin has the same methods
as coroutines (`Reader` / `AsyncReader`, `Reporter` / `AsyncReporter`, `Evaluator` /
`AsyncEvaluator`). tests/unit/clients/test_public_api.py keeps the names and twins in step.

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
from ckptlog.evaluator import AsyncEvaluator
from ckptlog.event_warnings import EventWarning
from ckptlog.invoke import Outcome
from ckptlog.reader import AsyncReader, WaitResult
from ckptlog.reporter import AsyncReporter, SentEvent
from ckptlog.score_check import ScoreMissingWarning
from ckptlog.sync_clients import Evaluator, Reader, Reporter
from ckptlog.views import ReportedCheckpoint, RunView
from events.codec import DecodeLimits
from events.state import Problem
from processor.errors import CkptlogError, ConfigError
from processor.kafka.connection import KafkaConnection
from processor.kafka.errors import KafkaIOError
from processor.kafka.settings import ConnectionSettings

__all__ = [
    "AsyncEvaluator",
    "AsyncReader",
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
    "ScoreMissingWarning",
    "SentEvent",
    "Topics",
    "WaitResult",
]


def __getattr__(name: str) -> object:
    """`SyncReader`: the synchronous reader's name before 0.2, kept one release with a warning."""
    if name == "SyncReader":
        import warnings

        warnings.warn("ckptlog.SyncReader is now ckptlog.Reader", DeprecationWarning, stacklevel=2)
        return Reader
    raise AttributeError(f"module 'ckptlog' has no attribute {name!r}")
