"""The one exception root of ckptlog; every error names its object and the next step.

Both sides import it: the processor's packages and the client library (ckptlog/client/errors.py builds
on it, and the Kafka adapter both use raises `KafkaIOError`, a `BrokerError`). It imports nothing,
so the client loads no server code through it (tests/unit/test_architecture.py).
"""

from __future__ import annotations


class CkptlogError(Exception):
    """Root of every error ckptlog raises on purpose."""


class ConfigError(CkptlogError):
    """A setting or flag is invalid; the message says which and how to fix it."""


class BrokerError(CkptlogError):
    """The Kafka broker could not be reached, started or used."""


class StorageError(CkptlogError):
    """Object storage (fsspec) failed; the message names the URL."""


class ObjectMissing(StorageError):
    """An object that was listed (or expected) does not exist (any more)."""


class SnapshotError(CkptlogError):
    """A snapshot could not be written, read, verified or restored."""


class SnapshotCorrupt(SnapshotError):
    """A snapshot failed its checksum or could not be parsed; restore skips it."""


class SnapshotVersionError(SnapshotError):
    """A snapshot has a schema version this build does not know; upgrade ckptlog."""


class OffsetOutOfRange(CkptlogError):
    """The log no longer holds the offset a snapshot needs to replay from."""
