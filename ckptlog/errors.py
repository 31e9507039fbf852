"""Errors of the client library; all subclass CkptlogError so one `except` catches ckptlog."""

from __future__ import annotations

from processor.errors import CkptlogError, ConfigError

NO_KAFKA = "no Kafka configured: set KAFKA_BOOTSTRAP_SERVERS or run `ckptlog broker start`"


class ClientError(CkptlogError):
    """A client (Reporter, Evaluator, Reader) cannot do what was asked."""


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
