"""How to reach the cluster: bootstrap servers plus the security passthrough settings.

`client_kwargs()` is the single place these become aiokafka keyword arguments, shared by
every consumer, producer and admin client ckptlog creates.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiokafka.helpers import create_ssl_context

from ckptlog.errors import ConfigError
from ckptlog.kafka import throttle
from ckptlog.kafka.errors import KafkaIOError, map_kafka_errors
from ckptlog.kafka.fence import Internals, use_internals
from ckptlog.kafka.settings import DEFAULT_DELIVERY_TIMEOUT_S, PROTOCOLS

_PROTOCOLS = PROTOCOLS


class _RedactSasl(logging.Filter):
    """aiokafka logs every request it sends at DEBUG, SASL/PLAIN's (user, password) bytes
    included; a DEBUG log must never carry a secret, so those requests lose their body here."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if any(type(arg).__name__.startswith("SaslAuthenticate") for arg in args):
            record.args = tuple(
                "<SASL authentication request: redacted by ckptlog>"
                if type(arg).__name__.startswith("SaslAuthenticate")
                else arg
                for arg in args
            )
        return True


logging.getLogger("aiokafka.conn").addFilter(_RedactSasl())
throttle.install()  # aiokafka's reconnect errors, thousands a second while a broker is away


@dataclass(frozen=True, slots=True)
class KafkaConnection:
    bootstrap_servers: str
    client_id: str = "ckptlog"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = field(default=None, repr=False)  # never in a log line
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    delivery_timeout_s: float = DEFAULT_DELIVERY_TIMEOUT_S  # a client's send, then KafkaIOError
    aiokafka_internals: Internals = "auto"  # ckptlog/kafka/fence.py: "off" keeps to aiokafka's public API

    @property
    def internals(self) -> bool:
        """Whether this connection's clients may use aiokafka's private attributes (fence.py)."""
        return use_internals(self.aiokafka_internals)

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments common to AIOKafkaConsumer, AIOKafkaProducer and the admin client."""
        if self.security_protocol not in _PROTOCOLS:
            raise ConfigError(
                f"security_protocol {self.security_protocol!r} for {self.bootstrap_servers} is not "
                f"one of {', '.join(_PROTOCOLS)}; fix CKPTLOG_SECURITY_PROTOCOL or the config file"
            )
        kwargs: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers,
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
        }
        if self.security_protocol.startswith("SASL"):
            kwargs["sasl_mechanism"] = self.sasl_mechanism or "PLAIN"
            kwargs["sasl_plain_username"] = self.sasl_plain_username
            kwargs["sasl_plain_password"] = self.sasl_plain_password
        if self.security_protocol.endswith("SSL"):
            try:
                kwargs["ssl_context"] = create_ssl_context(
                    cafile=self.ssl_cafile, certfile=self.ssl_certfile, keyfile=self.ssl_keyfile
                )
            except (OSError, ValueError) as exc:
                raise ConfigError(
                    f"cannot build the TLS context for {self.bootstrap_servers}: {exc}; check "
                    "ssl_cafile / ssl_certfile / ssl_keyfile"
                ) from exc
        return kwargs


class _Client(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


CHECK_BROKER = "check --bootstrap-servers / KAFKA_BOOTSTRAP_SERVERS and that the broker is up"


async def start_client(
    client: _Client,
    conn: KafkaConnection,
    what: str,
    *,
    failure: str | None = None,
    next_step: str = CHECK_BROKER,
    fenced: str | None = None,
) -> None:
    """Start an aiokafka client; on failure stop it (releasing its sockets) and raise KafkaIOError
    (FencedError) naming `what` and the servers, or `failure` when given."""
    failure = failure or f"{what} cannot reach Kafka at {conn.bootstrap_servers}"
    try:
        with map_kafka_errors(failure, next_step, fenced=fenced):
            await client.start()
    except KafkaIOError:
        await client.stop()
        raise
