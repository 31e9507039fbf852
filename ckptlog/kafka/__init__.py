"""The Kafka adapter: the only package that imports aiokafka.

Its names load on first use, so `ckptlog.kafka.discovery` and `ckptlog.kafka.probe` (where
Kafka is: a plain socket, no aiokafka) cost the launcher and `ckptlog broker` no aiokafka import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptlog.kafka.connection import KafkaConnection
    from ckptlog.kafka.consumer import AssignmentListener, GroupConsumer
    from ckptlog.kafka.errors import FencedError, KafkaIOError, TopicSetupError
    from ckptlog.kafka.factory import BrokerClients
    from ckptlog.kafka.producers import IdempotentProducer, TransactionalProducer, produce, transactional_id
    from ckptlog.kafka.reader import Record, TopicReader, read_latest, read_topic
    from ckptlog.kafka.records import Header, InputRecord, OutRecord, PartitionId
    from ckptlog.kafka.topics import TopicSpec, delete_prefix, ensure_topics, topic_partitions

_HOME = {
    "connection": ("KafkaConnection",),
    "consumer": ("AssignmentListener", "GroupConsumer"),
    "errors": ("FencedError", "KafkaIOError", "TopicSetupError"),
    "factory": ("BrokerClients",),
    "producers": ("IdempotentProducer", "TransactionalProducer", "produce", "transactional_id"),
    "reader": ("Record", "TopicReader", "read_latest", "read_topic"),
    "records": ("Header", "InputRecord", "OutRecord", "PartitionId"),
    "topics": ("TopicSpec", "delete_prefix", "ensure_topics", "topic_partitions"),
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}


def __getattr__(name: str) -> Any:
    """`ckptlog.kafka.read_topic` imports ckptlog.kafka.reader on first use."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "AssignmentListener",
    "BrokerClients",
    "FencedError",
    "GroupConsumer",
    "Header",
    "IdempotentProducer",
    "InputRecord",
    "KafkaConnection",
    "KafkaIOError",
    "OutRecord",
    "PartitionId",
    "Record",
    "TopicReader",
    "TopicSetupError",
    "TopicSpec",
    "TransactionalProducer",
    "delete_prefix",
    "ensure_topics",
    "produce",
    "read_latest",
    "read_topic",
    "topic_partitions",
    "transactional_id",
]
