"""ckptlog's client library: report from training jobs, validate checkpoints, read the state.

    from ckptlog import Reporter, AsyncReporter, Evaluator, Reader

See docs/clients.md.
"""

from ckptlog.connect import Topics
from ckptlog.errors import ClientClosed, ClientError, FunctionLoadError, InvalidEvent, NoKafkaConfigured
from ckptlog.evaluator import Evaluator
from ckptlog.invoke import Outcome
from ckptlog.reader import Reader, WaitResult
from ckptlog.reporter import AsyncReporter, Reporter, SentEvent
from ckptlog.views import ReportedCheckpoint, RunView

__all__ = [
    "AsyncReporter",
    "ClientClosed",
    "ClientError",
    "Evaluator",
    "FunctionLoadError",
    "InvalidEvent",
    "NoKafkaConfigured",
    "Outcome",
    "Reader",
    "ReportedCheckpoint",
    "Reporter",
    "RunView",
    "SentEvent",
    "Topics",
    "WaitResult",
]
