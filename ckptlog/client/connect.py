"""Where the clients find Kafka and which topics they use (the processor's defaults).

Every client takes `connection=`: a `ConnectionSettings` (the model `ckptlog run` reads: bootstrap
servers, TLS, SASL, delivery timeout), or a ready `KafkaConnection`. Without one a client reads
`ConnectionSettings` from the CKPTLOG_* environment, exactly as `ckptlog run` does, so a security
setting is never silently dropped; `ConnectionSettings.load("ckptlog.toml")` reads a `--config` file.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ckptlog.client.errors import NoKafkaConfigured
from ckptlog.errors import ConfigError
from ckptlog.events import topics
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.discovery import find_bootstrap
from ckptlog.kafka.settings import ConnectionSettings

Connection = ConnectionSettings | KafkaConnection
"""What a client's `connection=` takes."""

EVENTS_TOPIC = topics.INPUT
VALIDATIONS_TOPIC = topics.VALIDATIONS
STATE_TOPIC = topics.STATE
WATERMARKS_TOPIC = topics.WATERMARKS


@dataclass(frozen=True, slots=True)
class Topics:
    """Topic names; override them all at once for a non-default deployment (or the demo)."""

    events: str = EVENTS_TOPIC
    validations: str = VALIDATIONS_TOPIC
    state: str = STATE_TOPIC
    watermarks: str = WATERMARKS_TOPIC

    @classmethod
    def prefixed(cls, prefix: str) -> Topics:
        """`prefixed("demo-1")` -> demo-1.events, demo-1.validations, ..."""
        return cls(f"{prefix}.events", f"{prefix}.validations", f"{prefix}.state", f"{prefix}.watermarks")


def require_bootstrap(bootstrap_servers: str | None) -> str:
    """`bootstrap_servers`, else $KAFKA_BOOTSTRAP_SERVERS / $CKPTLOG_BOOTSTRAP_SERVERS, else the
    already running default local broker (`ckptlog broker start`); else `NoKafkaConfigured`.
    Never starts a broker."""
    found = find_bootstrap(bootstrap_servers)
    if found is None:
        raise NoKafkaConfigured()
    return found


def connect_now(bootstrap_servers: str | None, client_id: str, connection: Connection | None = None) -> KafkaConnection:
    """The client's connection: `connection` as given, else the CKPTLOG_* settings; the address is
    `bootstrap_servers`, else the settings', else `require_bootstrap`'s. Raises ConfigError for a
    setting the connection cannot honour. Blocking (it may probe the local broker)."""
    if isinstance(connection, KafkaConnection):
        if bootstrap_servers is not None and bootstrap_servers != connection.bootstrap_servers:
            raise ConfigError(
                f"bootstrap_servers={bootstrap_servers!r} and connection= (to {connection.bootstrap_servers}) "
                "disagree; pass one of them"
            )
        return connection
    settings = connection if connection is not None else ConnectionSettings.load()
    return settings.connect(require_bootstrap(bootstrap_servers or settings.bootstrap_servers), client_id)


async def resolve(
    bootstrap_servers: str | None, client_id: str, connection: Connection | None = None
) -> KafkaConnection:
    """`connect_now` off the event loop."""
    if isinstance(connection, KafkaConnection) and bootstrap_servers is None:
        return connection
    return await asyncio.to_thread(connect_now, bootstrap_servers, client_id, connection)
