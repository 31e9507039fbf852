"""The client library: what training jobs, evaluators and readers import (docs/clients.md).

`ckptlog` re-exports these names (`from ckptlog import Reporter`); this package imports only the wire
contract (ckptlog.events), the Kafka adapter (ckptlog.kafka) and the exception root (ckptlog.errors),
never the processor (tests/unit/test_architecture.py).
"""

from ckptlog.client.connect import Topics
from ckptlog.client.dead_letters import DeadLetter
from ckptlog.client.errors import (
    ClientClosed,
    ClientError,
    EventRejected,
    FunctionLoadError,
    InvalidEvent,
    NoKafkaConfigured,
    NotConfirmed,
    ReportsUndelivered,
)
from ckptlog.client.evaluator import AsyncEvaluator
from ckptlog.client.event_warnings import EventWarning
from ckptlog.client.invoke import Outcome
from ckptlog.client.reader import AsyncReader, WaitResult
from ckptlog.client.reporter import AsyncReporter, SentEvent
from ckptlog.client.score_check import ScoreMissingWarning
from ckptlog.client.sync_clients import Evaluator, Reader, Reporter
from ckptlog.client.views import ReportedCheckpoint, RunView
from ckptlog.errors import CkptlogError, ConfigError
from ckptlog.events.codec import DecodeLimits
from ckptlog.events.state import Problem
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.errors import KafkaIOError
from ckptlog.kafka.settings import ConnectionSettings

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
