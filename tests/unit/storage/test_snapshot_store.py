"""SnapshotStore rules beyond the backend contract: naming, argument checks, prune edge cases."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptlog.errors import SnapshotError, StorageError
from ckptlog.processor.storage.objects import STALE_TEMP_S, TEMP_PREFIX, ObjectStore
from ckptlog.processor.storage.snapshots import SnapshotName, SnapshotStore, content_digest
from tests.storage_contract import decode, encode

OFFSETS = st.integers(min_value=0, max_value=2**63 - 1)
DIGESTS = st.text(alphabet="0123456789abcdef", min_size=12, max_size=12)


@given(OFFSETS, OFFSETS, DIGESTS, DIGESTS)
def test_lexical_name_order_is_offset_order(a: int, b: int, da: str, db: str) -> None:
    na, nb = SnapshotName(a, da), SnapshotName(b, db)
    if a != b:
        assert (na.filename < nb.filename) == (a < b)
    assert SnapshotName.parse(na.filename) == na


@given(OFFSETS, DIGESTS, OFFSETS, DIGESTS)
def test_a_delta_name_names_its_predecessor(offset: int, digest: str, previous: int, link: str) -> None:
    name = SnapshotName(offset, digest, (previous, link))
    assert name.filename.startswith(f"delta-{offset:020d}-{digest}-on-")
    assert SnapshotName.parse(name.filename) == name and name.key == (offset, digest)


@pytest.mark.parametrize(
    "name",
    [
        "delta-00000000000000000002-0123456789ab.json",  # a delta names what it is on
        "delta-00000000000000000002-0123456789ab-on-1-0123456789ab.json",
        "snapshot-00000000000000000002-0123456789ab-on-00000000000000000001-0123456789ab.json",
        "snapshot-1-0123456789ab.json",
        "snapshot-00000000000000000001-0123456789AB.json",
        "snapshot-00000000000000000001-0123456789ab.json.tmp",
        "README",
        ".tmp-x-snapshot",
    ],
)
def test_foreign_names_are_not_snapshots(name: str) -> None:
    assert SnapshotName.parse(name) is None


@pytest.mark.parametrize(
    ("topic", "partition", "keep"),
    [
        ("", 0, 1),
        ("..", 0, 1),
        ("a/b", 0, 1),
        ("x" * 250, 0, 1),
        ("t", -1, 1),
        ("t", 0, 0),
    ],
)
def test_invalid_arguments_are_refused(tmp_path: Path, topic: str, partition: int, keep: int) -> None:
    with pytest.raises(SnapshotError, match=str(tmp_path)):
        SnapshotStore(str(tmp_path), topic, partition, keep=keep)


@pytest.mark.parametrize("offset", [-1, 10**20])
def test_offsets_outside_kafka_range_are_refused(tmp_path: Path, offset: int) -> None:
    snaps = SnapshotStore(str(tmp_path), "t", 0)
    with pytest.raises(SnapshotError, match=f"{tmp_path}/t/0"):
        snaps.write(b"x", offset)
    assert snaps.list_offsets() == []


def test_rewriting_the_same_snapshot_is_idempotent(tmp_path: Path) -> None:
    snaps = SnapshotStore(str(tmp_path), "t", 0)
    first = snaps.write(encode("s"), 7)
    assert snaps.write(encode("s"), 7) == first
    assert first.endswith(f"-{content_digest(encode('s'))}.json")
    assert snaps.list_offsets() == [7]


def test_foreign_objects_beside_snapshots_are_ignored(tmp_path: Path) -> None:
    store = ObjectStore(str(tmp_path))
    store.put_immutable("t/0/notes.txt", b"not a snapshot")
    store.put_immutable("t/0/zzz-snapshot.json", b"neither")
    snaps = SnapshotStore(str(tmp_path), "t", 0, keep=1)
    snaps.write(encode("one"), 1)
    snaps.write(encode("two"), 2)
    assert snaps.list_offsets() == [2]
    names = store.list("t/0/")
    assert [n for n in names if not n.startswith("t/0/snapshot-")] == ["t/0/notes.txt", "t/0/zzz-snapshot.json"]
    assert len(names) == 3
    assert snaps.load_latest(decode) == "two"


def test_prune_never_deletes_the_snapshot_just_written(tmp_path: Path) -> None:
    """After restoring past a corrupt newest snapshot, new (lower-offset) writes must survive."""
    snaps = SnapshotStore(str(tmp_path), "t", 0, keep=1)
    snaps.write(b"corrupt, no checksum", 200)
    snaps.write(encode("replayed to 150"), 150)
    assert snaps.list_offsets() == [150, 200]
    assert snaps.load_latest(decode) == "replayed to 150"
    snaps.write(encode("past it"), 250)
    assert snaps.list_offsets() == [250]


def test_failed_prune_is_logged_and_the_write_still_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    snaps = SnapshotStore(str(tmp_path), "t", 0, keep=1)
    snaps.write(encode("a"), 1)

    def refuse(self: ObjectStore, name: str) -> None:
        raise StorageError(f"could not delete {self.url(name)}: injected")

    with monkeypatch.context() as patch, caplog.at_level(logging.WARNING):
        patch.setattr(ObjectStore, "delete", refuse)
        url = snaps.write(encode("b"), 2)
    assert url.startswith(f"{tmp_path}/t/0/snapshot-00000000000000000002-")
    assert snaps.list_offsets() == [1, 2]
    assert any("pruning old snapshots" in r.getMessage() for r in caplog.records)
    snaps.write(encode("c"), 3)
    assert snaps.list_offsets() == [3]


def test_hash_mismatch_is_skipped_without_calling_decode(tmp_path: Path) -> None:
    snaps = SnapshotStore(str(tmp_path), "t", 0)
    snaps.write(encode("good"), 1)
    name = SnapshotName(2, content_digest(encode("bigger"))).filename
    ObjectStore(str(tmp_path)).put_immutable(f"t/0/{name}", encode("other"))
    seen: list[bytes] = []

    def counting_decode(chain: list[bytes], sha256s: list[str]) -> str:
        seen.extend(chain)
        return decode(chain, sha256s)

    assert snaps.load_latest(counting_decode) == "good"
    assert seen == [encode("good")]


def test_temp_files_of_writers_killed_mid_write_are_swept(tmp_path: Path) -> None:
    """SIGKILL skips a local write's cleanup (crash points object.half_written, object.before_rename):
    its temp file is removed by a later write once it is stale; one still being written is kept."""
    snaps = SnapshotStore(str(tmp_path), "t", 0, keep=2)
    snaps.write(encode("a"), 1)
    directory = tmp_path / "t" / "0"
    stale, fresh = directory / f"{TEMP_PREFIX}dead-snapshot.json", directory / f"{TEMP_PREFIX}busy-snapshot.json"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    os.utime(stale, (time.time() - STALE_TEMP_S - 60,) * 2)
    snaps.write(encode("b"), 2)
    assert not stale.exists() and fresh.exists()
    assert snaps.list_offsets() == [1, 2]
    assert ObjectStore(str(tmp_path)).sweep_temp("t/0", older_than_s=0) == 1
    assert not fresh.exists()


def test_a_restore_hashes_each_object_of_its_chain_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 39: each object was hashed whole twice at restore — by the store, against its name, and by
    the codec, for the chain's links (~0.08 s per 110 MB each). The codec now takes the store's
    digests; the links it checks (contract §6: a torn or lost delta) are the same SHA-256."""
    import hashlib

    from ckptlog.processor.core.delta import decode_chain
    from ckptlog.processor.core.snapshot import encode as encode_snapshot
    from tests.storage_contract import chain_of

    snaps = SnapshotStore(str(tmp_path), "t", 0, keep=5)
    written = chain_of(2)
    for w in written:
        snaps.write(w.data, w.next_offset, w.on)
    real, whole = hashlib.sha256, {w.data: 0 for w in written}

    def counting(data: bytes = b"") -> Any:
        if isinstance(data, bytes) and data in whole:
            whole[data] += 1
        return real(data)

    monkeypatch.setattr(hashlib, "sha256", counting)
    restored = snaps.load_latest(decode_chain)
    monkeypatch.undo()
    assert restored is not None and encode_snapshot(restored) == written[-1].expected
    assert list(whole.values()) == [1, 1, 1]
    assert restored.chain is not None and restored.chain.deltas == 2
    assert (restored.chain.base_sha256, restored.chain.tip_sha256) == (
        real(written[0].data).hexdigest(),
        real(written[-1].data).hexdigest(),
    )
