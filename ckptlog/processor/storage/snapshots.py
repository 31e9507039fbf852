"""Snapshot objects of one input partition: immutable, content-named, the newest K restore points kept (contract §6).

Each snapshot is its own object under `{base}/{topic}/{partition}/`: a base (a full snapshot),
`snapshot-{next_offset:020d}-{sha256[:12]}.json`, or a delta on the object before it in its chain,
`delta-{next_offset:020d}-{sha256[:12]}-on-{previous next_offset:020d}-{previous sha256[:12]}.json`.
Zero-padding makes lexical order offset order; the content hash makes a name unique to its bytes,
so nothing is ever overwritten or read-modified-written and a truncated object is caught before it
is decoded. A delta's name links it to its predecessor, so the chains (a base and the deltas on it)
are known from a listing alone: a restore reads one chain, and pruning keeps every object that a
kept restore point needs. Encoding, decoding and the links inside the objects (full SHA-256) belong
to the codec (ckptlog/processor/core/delta.py); this module only moves bytes.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from ckptlog.errors import ObjectMissing, SnapshotCorrupt, SnapshotError, StorageError
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.storage.objects import ObjectStore

log = logging.getLogger(__name__)

T = TypeVar("T")

_OFFSET_DIGITS = 20  # 2**63 - 1 has 19 digits: every Kafka offset fits.
_HASH_CHARS = 12
_AT = rf"(\d{{{_OFFSET_DIGITS}}})-([0-9a-f]{{{_HASH_CHARS}}})"
_NAME = re.compile(rf"^snapshot-{_AT}\.json$")
_DELTA = re.compile(rf"^delta-{_AT}-on-{_AT}\.json$")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")  # Kafka's own rule for topic names
_RESCANS = 3  # listings tried when snapshots vanish while being read (pruned by another instance)


class SnapshotName(NamedTuple):
    """A parsed snapshot object name: a base, or a delta `on` the (next_offset, digest) of its predecessor."""

    next_offset: int
    digest: str
    on: tuple[int, str] | None = None

    @property
    def key(self) -> tuple[int, str]:
        """What a delta's name calls this object by."""
        return self.next_offset, self.digest

    @property
    def filename(self) -> str:
        at = f"{self.next_offset:0{_OFFSET_DIGITS}d}-{self.digest}"
        if self.on is None:
            return f"snapshot-{at}.json"
        return f"delta-{at}-on-{self.on[0]:0{_OFFSET_DIGITS}d}-{self.on[1]}.json"

    @classmethod
    def parse(cls, filename: str) -> SnapshotName | None:
        """The name's parts, or None for an object that is not a snapshot (left alone)."""
        match = _NAME.match(filename)
        if match:
            return cls(int(match[1]), match[2])
        match = _DELTA.match(filename)
        return cls(int(match[1]), match[2], (int(match[3]), match[4])) if match else None


class ChainBroken(SnapshotError):
    """The object a delta was written on is gone (pruned by another instance): the delta can never be
    restored, so the next snapshot must be a base."""


def content_digest(data: bytes) -> str:
    """The hash prefix that names (and verifies) a snapshot's bytes."""
    return hashlib.sha256(data).hexdigest()[:_HASH_CHARS]


Decoder = Callable[[list[bytes], list[str]], T]
"""Decodes a chain's objects (the base first), given the SHA-256 (hex) of each, which the store
computed to verify it against its name: a decoder that needs the digests (the chain's links,
core/delta.py `decode_chain`) takes them instead of hashing ~100 MB again."""


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

    def write(
        self, data: bytes, next_offset: int, on: tuple[int, str] | None = None, *, sha256: str | None = None
    ) -> str:
        """Store one snapshot (a delta when `on` names its predecessor's next_offset and digest), prune
        to the newest `keep` restore points, and return the new object's URL. `ChainBroken` when the
        listing of the prune no longer shows `on`: the delta can never be restored (the next prune
        removes it). `sha256`: the hex SHA-256 of `data` when the caller has it (the processor seals
        each snapshot with it), so a base of ~100 MB is not hashed a second time for its name."""
        if not 0 <= next_offset < 10**_OFFSET_DIGITS:
            raise SnapshotError(
                f"next offset {next_offset} is not a Kafka offset; not writing a snapshot "
                f"to {self.url} — pass the offset of the next input record to replay"
            )
        digest = content_digest(data) if sha256 is None else sha256[:_HASH_CHARS]
        written = SnapshotName(next_offset, digest, on)
        crash_point("snapshot.before_write")
        self._objects.put_immutable(self._prefix + written.filename, data)
        crash_point("snapshot.before_prune")
        listed = self._prune(keep_also=written)
        if on is not None and listed is not None and on not in {name.key for name in listed}:
            raise ChainBroken(
                f"the snapshot at offset {on[0]} ({on[1]}) under {self.url} is gone (pruned by another "
                f"instance?): the delta {written.filename} on it can never be restored; write a full one"
            )
        return self.url_of(written)

    def url_of(self, name: SnapshotName) -> str:
        return self._objects.url(self._prefix + name.filename)

    def _snapshots(self) -> list[SnapshotName]:
        """Every snapshot object of this partition, oldest first."""
        names = (SnapshotName.parse(n[len(self._prefix) :]) for n in self._objects.list(self._prefix))
        return sorted((n for n in names if n is not None), key=lambda n: (n.key, n.on is not None))

    @staticmethod
    def _chain(name: SnapshotName, by_key: Mapping[tuple[int, str], SnapshotName]) -> list[SnapshotName] | None:
        """The objects a restore from `name` reads, base first; None when a link is missing."""
        chain, link = [name], name.on
        while link is not None:
            previous = by_key.get(link)
            if previous is None or previous.next_offset >= chain[-1].next_offset:
                return None  # gone, or not before it: no chain the codec could accept
            chain.append(previous)
            link = previous.on
        return chain[::-1]

    def _chains(self, names: Sequence[SnapshotName]) -> dict[SnapshotName, list[SnapshotName] | None]:
        by_key = {name.key: name for name in names}
        return {name: self._chain(name, by_key) for name in names}

    def _prune(self, keep_also: SnapshotName) -> list[SnapshotName] | None:
        """Delete every object that neither the newest `keep` restore points whose chain is whole
        nor the one just written need, and the stale temp files of writes killed mid-way; what was
        listed before (None if listing failed).

        Best effort: the new snapshot is already durable, so a failed delete is logged and
        left for the next write's prune instead of failing the write.
        """
        names: list[SnapshotName] | None = None
        try:
            names = self._snapshots()
            chains = self._chains(names)
            points = [name for name in names if chains[name] is not None][-self.keep :]
            needed = {part for point in [*points, keep_also] for part in chains.get(point) or [point]}
            for old in names:
                if old not in needed:
                    self._objects.delete(self._prefix + old.filename)
                    crash_point("snapshot.pruned_one")
            self._objects.sweep_temp(self._prefix.rstrip("/"))  # left by writers killed mid-write
        except StorageError as exc:
            log.warning("pruning old snapshots under %s failed, retrying after the next snapshot: %s", self.url, exc)
        return names

    def list_offsets(self) -> list[int]:
        """The next offsets of the stored restore points (bases and deltas), oldest first."""
        return [s.next_offset for s in self._snapshots()]

    def load_latest(self, decode: Decoder[T], max_offset: int | None = None) -> T | None:
        """The newest restore point (at most at `max_offset`) whose chain is whole, verifies and
        decodes, or None. `decode` gets the chain's objects, the base first, and their SHA-256.

        A missing link, a hash mismatch (truncated or altered object) or `SnapshotCorrupt` from
        `decode` skips to the next older restore point with a WARNING; `SnapshotVersionError`
        propagates, because a snapshot from a newer build must stop this one from starting. An
        object that vanished since it was listed (another instance pruned it) makes the scan start
        over. Any other storage failure (`StorageError`) propagates: the restore should retry, not
        start empty. `max_offset`: snapshots beyond it are passed over (contract §7: a restore never
        starts ahead of what the group has committed, or the outputs between would be lost).
        """
        for _ in range(_RESCANS):
            try:
                return self._load_newest(decode, max_offset)
            except ObjectMissing as exc:
                log.warning("a snapshot under %s vanished while it was read (%s); listing again", self.url, exc)
        return self._load_newest(decode, max_offset)

    def _load_newest(self, decode: Decoder[T], max_offset: int | None) -> T | None:
        names = self._snapshots()
        chains = self._chains(names)
        candidates = [s for s in names if max_offset is None or s.next_offset <= max_offset]
        read: dict[SnapshotName, tuple[bytes, str]] = {}  # objects the chains share are read (and hashed) once
        for snap in reversed(candidates):
            url, chain = self.url_of(snap), chains[snap]
            if chain is None:
                log.warning(
                    "skipping snapshot %s: an object of its chain is missing (a lost delta, or its base pruned); "
                    "trying the next older one",
                    url,
                )
                continue
            try:
                objects = [read.get(part) or read.setdefault(part, self._verified(part)) for part in chain]
                return decode([data for data, _ in objects], [sha256 for _, sha256 in objects])
            except SnapshotCorrupt as exc:
                log.warning("skipping corrupt snapshot %s (%s); trying the next older one", url, exc)
        if candidates:
            log.warning("no valid snapshot among %d under %s; starting from empty state", len(candidates), self.url)
        return None

    def _verified(self, name: SnapshotName) -> tuple[bytes, str]:
        """The object's bytes, if they still hash to the digest in its name, and their SHA-256 (hex)."""
        data = self._objects.get(self._prefix + name.filename)
        sha256 = hashlib.sha256(data).hexdigest()
        if sha256[:_HASH_CHARS] != name.digest:
            raise SnapshotCorrupt(
                f"{name.filename}: content hash {sha256[:_HASH_CHARS]} does not match the name ({len(data)} bytes; "
                "truncated or altered)"
            )
        return data, sha256
