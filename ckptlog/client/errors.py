"""Errors of the client library; all subclass CkptlogError so one `except` catches ckptlog."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptlog.errors import CkptlogError, ConfigError

if TYPE_CHECKING:
    from ckptlog.client.dead_letters import DeadLetter

NO_KAFKA = "no Kafka configured: set KAFKA_BOOTSTRAP_SERVERS or run `ckptlog broker start`"


class ClientError(CkptlogError):
    """A client (Reporter, Evaluator, AsyncReader) cannot do what was asked."""


class InvalidEvent(ClientError):
    """An event body would be rejected by the processor; raised before anything is sent."""


class ClientClosed(ClientError):
    """The client was used before `start()` / after `close()`."""


class FunctionLoadError(ClientError):
    """`--fn module:function` does not name an importable callable."""


class NoKafkaConfigured(ClientError, ConfigError):
    """No bootstrap servers given or in the environment, and no default local broker running.

    Clients never start a broker: raised at once, before any connection or process."""

    def __init__(self, message: str = NO_KAFKA) -> None:
        super().__init__(message)


class EventRejected(ClientError):
    """The processor dead-lettered an event (a Reporter call with `confirm=True`): `reason` is the
    reason code (ckptlog/events/rejections.py), `message` says what to fix, `letter` has the coordinates."""

    def __init__(self, message: str, letter: DeadLetter) -> None:
        super().__init__(message)
        self.reason, self.letter = letter.reason, letter


class NotConfirmed(ClientError):
    """The processor did not commit past an event within the time limit (is `ckptlog run` running?)."""


class ReportsUndelivered(ClientError):
    """The Ray callback's events could not reach Kafka within its buffer or its flush time
    (ckptlog.integrations.outbox): the job fails instead of dropping them silently."""
