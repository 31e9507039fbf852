"""Errors of the Kafka adapter; each names the topic/partition or transactional id at fault."""

from __future__ import annotations

from processor.errors import BrokerError


class KafkaIOError(BrokerError):
    """A Kafka request failed after the client's own retries."""


class FencedError(KafkaIOError):
    """Another producer with our transactional id took over: this instance is a zombie."""


class TopicSetupError(KafkaIOError):
    """A topic could not be created or described."""
