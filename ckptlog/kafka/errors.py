"""Errors of the Kafka adapter, and the one place aiokafka's errors become them.

Every message names the object at fault (topic[partition], group, transactional id, servers)
and the next step, so `map_kafka_errors` takes both and the adapter never hand-writes an
`except KafkaError` block.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from aiokafka.errors import InvalidProducerEpoch, KafkaError, ProducerFenced, TransactionalIdAuthorizationFailed

from ckptlog.errors import BrokerError

FENCED_ERRORS = (ProducerFenced, InvalidProducerEpoch, TransactionalIdAuthorizationFailed)
"""What a producer whose transactional id another producer took over gets from the broker."""


class KafkaIOError(BrokerError):
    """A Kafka request failed after the client's own retries."""


class FencedError(KafkaIOError):
    """Another producer with our transactional id took over: this instance is a zombie."""


class TopicSetupError(KafkaIOError):
    """A topic could not be created or described."""


class TopicMissing(TopicSetupError):
    """A topic that was to be read does not exist."""


@contextmanager
def map_kafka_errors(
    what: str,
    next_step: str,
    *,
    error: type[KafkaIOError] = KafkaIOError,
    fenced: str | None = None,
) -> Iterator[None]:
    """Raise aiokafka's errors inside the block as ckptlog's: a fencing error as
    `FencedError("{what}: fenced (...); {fenced}")`, any other KafkaError as
    `error("{what}: {exc!r}; {next_step}")`. ckptlog's own errors pass through unchanged."""
    try:
        yield
    except FENCED_ERRORS as exc:
        step = fenced or "another producer now uses this transactional id; stop using this one"
        raise FencedError(f"{what}: fenced by a newer producer ({type(exc).__name__}); {step}") from exc
    except KafkaError as exc:
        raise error(f"{what}: {exc!r}; {next_step}") from exc


@contextmanager
def best_effort(log: logging.Logger, event: str, what: str) -> Iterator[None]:
    """For calls whose failure changes nothing (stopping a client, aborting a doomed transaction,
    deleting throw-away topics): the mapped error is logged as a warning, not raised."""
    try:
        with map_kafka_errors(what, "ignored: nothing depends on it"):
            yield
    except KafkaIOError as exc:
        log.warning("event=%s message=%r", event, str(exc))
