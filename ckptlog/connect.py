"""Where the clients find Kafka and which topics they use (the processor's defaults)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ckptlog.errors import NoKafkaConfigured
from events import topics
from processor.kafka.connection import KafkaConnection
from processor.kafka.discovery import find_bootstrap

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


async def resolve(
    bootstrap_servers: str | None, client_id: str, connection: KafkaConnection | None = None
) -> KafkaConnection:
    """`connection` as given (TLS/SASL), else a connection to `require_bootstrap`'s address."""
    if connection is not None:
        return connection
    bootstrap = await asyncio.to_thread(require_bootstrap, bootstrap_servers)
    return KafkaConnection(bootstrap, client_id)
