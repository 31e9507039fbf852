"""A local, Docker-free Kafka broker for development, tests and CI.

Two entry points decide where Kafka is: `find_bootstrap` (clients) returns the configured
address or an already running default local broker, else None, and never starts one;
`ensure_bootstrap` (here: `ckptlog run`, `ckptlog demo`) starts-or-reuses that broker and says
so. `find_bootstrap` and what it reads (`default_dir`, broker.json as `BrokerState`, the
Metadata probe) live in the Kafka adapter, ckptlog.kafka.discovery and ckptlog.kafka.probe,
so the client library finds a broker without this launcher.
"""

from __future__ import annotations

from ckptlog.broker.config import BrokerConfig, render_server_properties
from ckptlog.broker.errors import (
    INSTALL_HINT,
    BrokerStartError,
    JarFetchError,
    PortInUseError,
    ToolMissingError,
)
from ckptlog.broker.jars import KAFKA_VERSION, JarCache, cache_root, fetch_jars
from ckptlog.broker.local import BrokerStatus, LocalBroker, ensure_bootstrap

__all__ = [
    "INSTALL_HINT",
    "KAFKA_VERSION",
    "BrokerConfig",
    "BrokerStartError",
    "BrokerStatus",
    "JarCache",
    "JarFetchError",
    "LocalBroker",
    "PortInUseError",
    "ToolMissingError",
    "cache_root",
    "ensure_bootstrap",
    "fetch_jars",
    "render_server_properties",
]
