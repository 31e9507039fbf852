"""Storage faults (issue 13, reliability suite 2): errors and latency injected on write, list,
read and delete, transient and persistent, against the real snapshot store, codec and Deleter.

What must hold: no corrupt snapshot is ever used (a damaged, truncated or vanished one is
skipped with a clear log line, a future version stops the restore with a clear error, a storage
failure propagates so the restore retries instead of starting empty); a failed snapshot write
leaves nothing half-written behind; deletions are retried until they succeed, and stay owed
(never dropped) while they fail.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from ckptlog.errors import SnapshotVersionError, StorageError
from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.core.delta import decode_chain as decode
from ckptlog.processor.core.snapshot import SCHEMA_VERSION, Snapshot, encode
from ckptlog.processor.storage.deletion import Deleter, RetryPolicy
from ckptlog.processor.storage.snapshots import SnapshotStore
from tests import factories as f
from tests.reliability.faulty_fs import Faults, FaultyFS, register

BASE = "faulty://snapshots"


@pytest.fixture
def faults() -> Iterator[Faults]:
    register()
    yield FaultyFS.faults
    FaultyFS.reset()


def snapshot_bytes(next_offset: int, runs: int = 2) -> bytes:
    fold = Fold(FoldSettings(default_root="file:///data"))
    for i in range(runs):
        fold.apply(f.event(f.report(f"run-{i}", {"acc": i}, f"file:///data/run-{i}/c{next_offset}")))
    return encode(Snapshot("events", 0, next_offset, fold.settings, fold.runs))


def test_a_failed_write_leaves_nothing_behind_and_the_next_one_works(faults: Faults) -> None:
    store = SnapshotStore(BASE, "events", 0)
    store.write(snapshot_bytes(10), 10)
    faults.plans["write"].fail_next = 1
    with pytest.raises(StorageError, match="injected write failure"):
        store.write(snapshot_bytes(20), 20)
    assert store.list_offsets() == [10]
    store.write(snapshot_bytes(20), 20)
    restored = store.load_latest(decode)
    assert restored is not None and restored.next_offset == 20


@pytest.mark.parametrize("corrupt", ["flip", "truncate"])
def test_damaged_reads_are_never_used(faults: Faults, corrupt: str, caplog: pytest.LogCaptureFixture) -> None:
    store = SnapshotStore(BASE, "events", 0)
    for offset in (10, 20, 30):
        store.write(snapshot_bytes(offset), offset)
    faults.plans["read"].corrupt = corrupt
    with caplog.at_level(logging.WARNING):
        assert store.load_latest(decode) is None  # every read is damaged: none is trusted
    assert sum("skipping corrupt snapshot" in r.getMessage() for r in caplog.records) == 3
    assert any("no valid snapshot among 3" in r.getMessage() for r in caplog.records)
    faults.plans["read"].corrupt = None
    restored = store.load_latest(decode)
    assert restored is not None and restored.next_offset == 30


def test_a_damaged_newest_snapshot_falls_back_to_the_previous_one(
    faults: Faults, caplog: pytest.LogCaptureFixture
) -> None:
    store = SnapshotStore(BASE, "events", 0)
    store.write(snapshot_bytes(10), 10)
    good = snapshot_bytes(20)
    damaged = good.replace(b'"next_offset":20', b'"next_offset":21')  # the checksum no longer matches
    store.write(damaged, 20)
    with caplog.at_level(logging.WARNING):
        restored = store.load_latest(decode)
    assert restored is not None and restored.next_offset == 10
    assert any("checksum mismatch" in r.getMessage() for r in caplog.records)


def test_a_future_version_stops_the_restore_with_a_clear_error(faults: Faults) -> None:
    store = SnapshotStore(BASE, "events", 0)
    store.write(snapshot_bytes(10), 10)
    outer = json.loads(snapshot_bytes(20))
    outer["schema_version"] = SCHEMA_VERSION + 1
    store.write(json.dumps(outer).encode(), 20)
    with pytest.raises(SnapshotVersionError, match="newer than this build reads.*upgrade ckptlog"):
        store.load_latest(decode)


@pytest.mark.parametrize("op", ["read", "list"])
def test_a_storage_failure_while_restoring_propagates(faults: Faults, op: str) -> None:
    """Starting from empty state because storage hiccupped would replay the whole log (or lose
    it to retention): the failure must reach the caller, which retries."""
    store = SnapshotStore(BASE, "events", 0)
    store.write(snapshot_bytes(10), 10)
    faults.plans[op].fail_always = True
    with pytest.raises(StorageError, match=f"injected {op} failure"):
        store.load_latest(decode)
    faults.plans[op].fail_always = False
    assert store.load_latest(decode) is not None


def test_a_snapshot_pruned_while_it_is_read_makes_the_scan_start_over(
    faults: Faults, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 13 case 8: another instance prunes the snapshot this one is about to read."""
    store = SnapshotStore(BASE, "events", 0, keep=2)
    store.write(snapshot_bytes(10), 10)
    store.write(snapshot_bytes(20), 20)
    other = SnapshotStore(BASE, "events", 0, keep=2)
    real_cat = FaultyFS.cat_file
    raced = {"done": False}

    def cat_racing(self: FaultyFS, path: str, *args: object, **kwargs: object) -> bytes:
        if not raced["done"]:
            raced["done"] = True
            other.write(snapshot_bytes(30), 30)  # the other instance writes 30 and prunes 10
            self.rm_file(path)  # ... and (in this race) the one being read vanishes too
        return real_cat(self, path, *args, **kwargs)

    monkeypatch.setattr(FaultyFS, "cat_file", cat_racing)
    with caplog.at_level(logging.WARNING):
        restored = store.load_latest(decode)
    assert restored is not None and restored.next_offset == 30
    assert any("vanished while it was read" in r.getMessage() for r in caplog.records)


def test_a_restore_never_starts_ahead_of_the_committed_offset(faults: Faults) -> None:
    store = SnapshotStore(BASE, "events", 0, keep=5)
    for offset in (10, 20, 30):
        store.write(snapshot_bytes(offset), offset)
    assert store.load_latest(decode, max_offset=25).next_offset == 20  # type: ignore[union-attr]
    assert store.load_latest(decode, max_offset=9) is None


async def test_deletions_are_retried_through_transient_faults_and_stay_owed_while_they_fail(faults: Faults) -> None:
    fs = FaultyFS()
    for name in ("a", "b", "c"):
        fs.pipe_file(f"/runs/r1/{name}/model.bin", b"w")
    done: list[tuple[str, str]] = []
    deleter = Deleter(retry=RetryPolicy(max_attempts=4, base_delay=0.01), on_done=done.extend)
    faults.plans["delete"].fail_next = 2
    faults.plans["delete"].latency_s = 0.01
    for name in ("a", "b", "c"):
        assert deleter.submit("r1", f"faulty://runs/r1/{name}", "faulty://runs/r1")
    assert await deleter.drain(timeout=10)
    assert sorted(path for _, path in done) == [f"faulty://runs/r1/{n}" for n in ("a", "b", "c")]
    assert faults.plans["delete"].failed == 2 and not fs.find("/runs/r1")

    fs.pipe_file("/runs/r1/d/model.bin", b"w")
    faults.plans["delete"].fail_always = True
    assert deleter.submit("r1", "faulty://runs/r1/d", "faulty://runs/r1")
    assert not await deleter.drain(timeout=5)
    assert deleter.outstanding == {("r1", "faulty://runs/r1/d")} and "injected delete failure" in str(deleter.failed)
    faults.plans["delete"].fail_always = False
    assert deleter.retry_failed() == 1 and await deleter.drain(timeout=5)
    assert ("r1", "faulty://runs/r1/d") in done and not fs.exists("/runs/r1/d")
    await deleter.close()
