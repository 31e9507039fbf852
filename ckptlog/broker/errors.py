"""Errors of the local-broker launcher; each says what to do next."""

from __future__ import annotations

from ckptlog.errors import BrokerError

INSTALL_HINT = "install a JDK 17+ and Maven, or set KAFKA_BOOTSTRAP_SERVERS"


class ToolMissingError(BrokerError):
    """java or mvn is not on PATH (or too old) so no local broker can run."""


class JarFetchError(BrokerError):
    """Maven could not resolve the Kafka server jars into the cache."""


class BrokerStartError(BrokerError):
    """The local broker process died or did not answer in time."""


class PortInUseError(BrokerError):
    """The port asked for with --port is already taken by another process."""
