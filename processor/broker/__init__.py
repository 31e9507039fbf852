"""A local, Docker-free Kafka broker for development, tests and CI.

`ensure_bootstrap` is the one entry point other commands need: it returns the
configured address or starts-or-reuses the default local broker.
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
    default_dir,
    ensure_bootstrap,
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
    "default_dir",
    "ensure_bootstrap",
    "fetch_jars",
    "render_server_properties",
]
