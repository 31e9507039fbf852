"""Pure configuration of a single-node KRaft broker: properties, logging, ids, ports."""

from __future__ import annotations

import base64
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"
DEFAULT_PORT = 9092

# Console appender only: the launcher redirects the JVM's stdout into broker.log.
LOG4J2_PROPERTIES = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = STDOUT
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = info
logger.broker.name = kafka.server.BrokerServer
logger.broker.level = info
"""


@dataclass(frozen=True)
class BrokerSecurity:
    """A SASL_SSL listener beside the plaintext one, for clients that must encrypt and
    authenticate (SASL/PLAIN): the broker's PKCS12 keystore and the users it accepts."""

    port: int
    keystore: Path
    password: str  # of the keystore and its key
    users: tuple[tuple[str, str], ...]  # (name, password)

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"


@dataclass(frozen=True)
class BrokerConfig:
    """What varies between local brokers: ports, the data directory, an optional secure listener."""

    port: int
    controller_port: int
    data_dir: Path
    node_id: int = 1
    security: BrokerSecurity | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"


def render_server_properties(cfg: BrokerConfig) -> str:
    """server.properties for a combined broker+controller that only listens on 127.0.0.1.

    Replication factors and ISR are 1 so transactions and consumer groups work on
    one node; rebalance delay 0 keeps tests fast; topics are never auto-created so
    a typo fails loudly instead of making an empty topic.
    """
    props = {
        "process.roles": "broker,controller",
        "node.id": str(cfg.node_id),
        "listeners": f"PLAINTEXT://{HOST}:{cfg.port},CONTROLLER://{HOST}:{cfg.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{cfg.port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.bootstrap.servers": f"{HOST}:{cfg.controller_port}",
        "log.dirs": str(cfg.data_dir),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    if cfg.security is not None:
        props.update(_secure_listener(cfg, cfg.security))
    return "".join(f"{key}={value}\n" for key, value in props.items())


def _secure_listener(cfg: BrokerConfig, security: BrokerSecurity) -> dict[str, str]:
    """The properties adding a SASL_SSL (PLAIN) listener; the broker itself keeps PLAINTEXT."""
    users = " ".join(f'user_{name}="{password}"' for name, password in security.users)
    jaas = f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
    return {
        "listeners": f"PLAINTEXT://{HOST}:{cfg.port},SASL_SSL://{security.bootstrap},"
        f"CONTROLLER://{HOST}:{cfg.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{cfg.port},SASL_SSL://{security.bootstrap}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(security.keystore),
        "ssl.keystore.password": security.password,
        "ssl.key.password": security.password,
    }


def new_cluster_id() -> str:
    """A Kafka-style cluster id (URL-safe base64 of a random UUID, no padding)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):  # Kafka rejects ids that look like CLI flags
            return text


def port_is_free(port: int, host: str = HOST) -> bool:
    """True when a listener could bind `port` now (SO_REUSEADDR, as the JVM does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = HOST, exclude: tuple[int, ...] = ()) -> int:
    """An ephemeral port that is free right now (and not in `exclude`)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in exclude:
            return port
