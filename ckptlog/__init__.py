"""ckptlog's client library: report from training jobs, validate checkpoints, read the state.

    from ckptlog import Reporter, AsyncReporter, Reader, AsyncReader, Evaluator, AsyncEvaluator

One naming scheme, httpx's: the plain name is synchronous, its `Async` twin has the same methods
as coroutines (`Reader` / `AsyncReader`, `Reporter` / `AsyncReporter`, `Evaluator` /
`AsyncEvaluator`). tests/unit/clients/test_public_api.py keeps the names and twins in step.

See docs/clients.md.
"""

import typing as _typing

from ckptlog import compiled as _compiled

_compiled.choose()  # the compiled fold or its sources, before anything imports one of its modules

__version__ = "0.3.0"

if _typing.TYPE_CHECKING:  # the names below are imported on first use (PEP 562): `import ckptlog.cli.main`, the
    # fold or the processor must not pay for the client library, aiokafka and pydantic (`ckptlog --help`)
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


def __getattr__(name: str) -> object:
    """The public names, from ckptlog.client on first use; `SyncReader`, the synchronous reader's name
    before 0.2, kept with a warning."""
    if name in __all__:
        import ckptlog.client

        value = getattr(ckptlog.client, name)
        globals()[name] = value
        return value
    if name == "SyncReader":
        import warnings

        warnings.warn("ckptlog.SyncReader is now ckptlog.Reader", DeprecationWarning, stacklevel=2)
        return __getattr__("Reader")
    raise AttributeError(f"module 'ckptlog' has no attribute {name!r}")
