"""The Kafka adapter: the only package that imports aiokafka."""

from processor.kafka.connection import KafkaConnection
from processor.kafka.consumer import AssignmentListener, GroupConsumer
from processor.kafka.errors import FencedError, KafkaIOError, TopicSetupError
from processor.kafka.factory import BrokerClients
from processor.kafka.producers import IdempotentProducer, TransactionalProducer, produce, transactional_id
from processor.kafka.reader import Record, TopicReader, read_latest, read_topic
from processor.kafka.records import Header, InputRecord, OutRecord, PartitionId
from processor.kafka.topics import TopicSpec, delete_prefix, ensure_topics, topic_partitions

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
