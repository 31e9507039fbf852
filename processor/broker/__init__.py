"""A local, Docker-free Kafka broker for development, tests and CI.

Two entry points decide where Kafka is: `find_bootstrap` (clients) returns the configured
address or an already running default local broker, else None, and never starts one;
`ensure_bootstrap` (`ckptlog run`, `ckptlog demo`) starts-or-reuses that broker and says so.
"""

from __future__ import annotations

from processor.broker.config import BrokerConfig, render_server_properties
from processor.broker.errors import (
    INSTALL_HINT,
    BrokerStartError,
    JarFetchError,
    PortInUseError,
    ToolMissingError,
)
from processor.broker.jars import KAFKA_VERSION, JarCache, cache_root, fetch_jars
from processor.broker.local import (
    BrokerState,
    BrokerStatus,
    LocalBroker,
    configured_bootstrap,
    default_dir,
    ensure_bootstrap,
    find_bootstrap,
    running_bootstrap,
)
from processor.broker.probe import answers

__all__ = [
    "INSTALL_HINT",
    "KAFKA_VERSION",
    "BrokerConfig",
    "BrokerStartError",
    "BrokerState",
    "BrokerStatus",
    "JarCache",
    "JarFetchError",
    "LocalBroker",
    "PortInUseError",
    "ToolMissingError",
    "answers",
    "cache_root",
    "configured_bootstrap",
    "default_dir",
    "ensure_bootstrap",
    "fetch_jars",
    "find_bootstrap",
    "render_server_properties",
    "running_bootstrap",
]
