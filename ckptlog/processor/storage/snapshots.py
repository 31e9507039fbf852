"""Snapshot objects of one input partition: immutable, content-named, newest K kept (contract §6).

Each snapshot is its own object, `snapshot-{next_offset:020d}-{sha256[:12]}.json`, under
`{base}/{topic}/{partition}/`. Zero-padding makes lexical order offset order; the content
hash makes a name unique to its bytes, so nothing is ever overwritten or read-modified-written
and a truncated object is caught before it is decoded. Encoding, decoding and the snapshot's
own checksum belong to the codec; this module only moves bytes.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar

from ckptlog.errors import ObjectMissing, SnapshotCorrupt, SnapshotError, StorageError
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.storage.objects import ObjectStore

log = logging.getLogger(__name__)

T = TypeVar("T")

_OFFSET_DIGITS = 20  # 2**63 - 1 has 19 digits: every Kafka offset fits.
_HASH_CHARS = 12
_NAME = re.compile(rf"^snapshot-(\d{{{_OFFSET_DIGITS}}})-([0-9a-f]{{{_HASH_CHARS}}})\.json$")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")  # Kafka's own rule for topic names
_RESCANS = 3  # listings tried when snapshots vanish while being read (pruned by another instance)


class SnapshotName(NamedTuple):
    """A parsed snapshot object name; sorts by offset, then hash."""

    next_offset: int
    digest: str

    @property
    def filename(self) -> str:
        return f"snapshot-{self.next_offset:0{_OFFSET_DIGITS}d}-{self.digest}.json"

    @classmethod
    def parse(cls, filename: str) -> SnapshotName | None:
        """The name's parts, or None for an object that is not a snapshot (left alone)."""
        match = _NAME.match(filename)
        return cls(int(match[1]), match[2]) if match else None


def content_digest(data: bytes) -> str:
    """The hash prefix that names (and verifies) a snapshot's bytes."""
    return hashlib.sha256(data).hexdigest()[:_HASH_CHARS]


class SnapshotStore:
    """Snapshots of (topic, partition) under a base URL; `write` keeps the newest `keep`."""

    def __init__(
        self,
        base_url: str,
        topic: str,
        partition: int,
        keep: int = 3,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not _TOPIC.match(topic) or topic in {".", ".."}:
            raise SnapshotError(
                f"topic {topic!r} is not a valid Kafka topic name; snapshots under {base_url} "
                "are stored per topic, so pass the input topic's real name"
            )
        if partition < 0 or keep < 1:
            raise SnapshotError(
                f"snapshots of {topic}[{partition}] under {base_url}: partition must be >= 0 "
                f"and keep >= 1 (got partition={partition}, keep={keep}); fix the settings"
            )
        self.keep = keep
        self._prefix = f"{topic}/{partition}/"
        self._objects = ObjectStore(base_url, storage_options)

    @property
    def url(self) -> str:
        """The directory URL holding this partition's snapshots."""
        return self._objects.url(self._prefix.rstrip("/"))

    def write(self, data: bytes, next_offset: int) -> str:
        """Store one snapshot, prune to the newest `keep`, and return the new object's URL."""
        if not 0 <= next_offset < 10**_OFFSET_DIGITS:
            raise SnapshotError(
                f"next offset {next_offset} is not a Kafka offset; not writing a snapshot "
                f"to {self.url} — pass the offset of the next input record to replay"
            )
        written = SnapshotName(next_offset, content_digest(data))
        crash_point("snapshot.before_write")
        self._objects.put_immutable(self._prefix + written.filename, data)
        crash_point("snapshot.before_prune")
        self._prune(keep_also=written)
        return self._objects.url(self._prefix + written.filename)

    def _snapshots(self) -> list[SnapshotName]:
        """Every snapshot of this partition, oldest first."""
        names = (SnapshotName.parse(n[len(self._prefix) :]) for n in self._objects.list(self._prefix))
        return sorted(n for n in names if n is not None)

    def _prune(self, keep_also: SnapshotName) -> None:
        """Delete all but the newest `keep` snapshots (and the one just written), and the stale temp
        files of writes killed mid-way.

        Best effort: the new snapshot is already durable, so a failed delete is logged and
        left for the next write's prune instead of failing the write.
        """
        try:
            for old in self._snapshots()[: -self.keep]:
                if old != keep_also:
                    self._objects.delete(self._prefix + old.filename)
                    crash_point("snapshot.pruned_one")
            self._objects.sweep_temp(self._prefix.rstrip("/"))  # left by writers killed mid-write
        except StorageError as exc:
            log.warning("pruning old snapshots under %s failed, retrying after the next snapshot: %s", self.url, exc)

    def list_offsets(self) -> list[int]:
        """The next offsets of the stored snapshots, oldest first."""
        return [s.next_offset for s in self._snapshots()]

    def load_latest(self, decode: Callable[[bytes], T], max_offset: int | None = None) -> T | None:
        """The newest snapshot (at most at `max_offset`) that verifies and decodes, or None.

        A hash mismatch (truncated or altered object) or `SnapshotCorrupt` from `decode`
        skips to the next older snapshot with a WARNING; `SnapshotVersionError` propagates,
        because a snapshot from a newer build must stop this one from starting. An object that
        vanished since it was listed (another instance pruned it) makes the scan start over.
        Any other storage failure (`StorageError`) propagates: the restore should retry, not
        start empty. `max_offset`: snapshots beyond it are passed over (contract §7: a restore never
        starts ahead of what the group has committed, or the outputs between would be lost).
        """
        for _ in range(_RESCANS):
            try:
                return self._load_newest(decode, max_offset)
            except ObjectMissing as exc:
                log.warning("a snapshot under %s vanished while it was read (%s); listing again", self.url, exc)
        return self._load_newest(decode, max_offset)

    def _load_newest(self, decode: Callable[[bytes], T], max_offset: int | None) -> T | None:
        candidates = [s for s in self._snapshots() if max_offset is None or s.next_offset <= max_offset]
        for snap in reversed(candidates):
            name = self._prefix + snap.filename
            try:
                return decode(self._verified(name, snap.digest))
            except SnapshotCorrupt as exc:
                log.warning(
                    "skipping corrupt snapshot %s (%s); trying the next older one", self._objects.url(name), exc
                )
        if candidates:
            log.warning("no valid snapshot among %d under %s; starting from empty state", len(candidates), self.url)
        return None

    def _verified(self, name: str, digest: str) -> bytes:
        """The object's bytes, if they still hash to the digest in their name."""
        data = self._objects.get(name)
        actual = content_digest(data)
        if actual != digest:
            raise SnapshotCorrupt(
                f"content hash {actual} does not match the name ({len(data)} bytes; truncated or altered)"
            )
        return data
