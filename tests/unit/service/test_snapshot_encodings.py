"""The scheduler's bases take the entries kept from its previous snapshots (contract §6 *Encodings
kept*): written to a real local directory, each base is byte for byte the full snapshot of its moment,
through a write that fails (the directory replaced by a file) and the one after it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from ckptlog.kafka.records import PartitionId
from ckptlog.processor.core import Fold
from ckptlog.processor.core.snapshot import decode, encode, of_fold
from ckptlog.processor.service.snapshotting import SnapshotScheduler
from ckptlog.processor.storage.snapshots import SnapshotStore, content_digest
from tests import factories as f
from tests.unit.core.test_fold_properties import ROOT, SETTINGS

PID = PartitionId("events", 0)


def written(directory: Path, next_offset: int) -> bytes:
    names = [n for n in os.listdir(directory) if n.startswith(f"snapshot-{next_offset:020d}-")]
    assert len(names) == 1, os.listdir(directory)
    return (directory / names[0]).read_bytes()


async def test_bases_from_kept_entries_through_a_failed_write(tmp_path: Path) -> None:
    store = SnapshotStore(str(tmp_path), PID.topic, PID.partition, keep=10)
    fold = Fold(SETTINGS, track_changes=True)
    for run in ("a", "b", "c"):
        fold.apply(f.event(f.started(run, f"{ROOT}/{run}", event_id=f"s-{run}")))
    scheduler = SnapshotScheduler(PID, store, 1, 3600, None, max_deltas=0)  # every snapshot a base
    assert scheduler.start(fold, 3)
    await scheduler.wait()
    directory = tmp_path / PID.topic / "0"
    assert written(directory, 3) == encode(of_fold(fold, PID.topic, 0, 3)) and len(scheduler.encodings) == 3
    fold.apply(f.event(f.report("b", {"x": 1}, f"{ROOT}/b/c1", event_id="r-b")))
    shutil.move(directory, tmp_path / "aside")
    directory.write_bytes(b"")  # the next write fails: the partition's directory is a file
    assert scheduler.start(fold, 4)
    await scheduler.wait()
    assert scheduler.last_offset == 3 and fold.changed == {"b": None}  # given back: the next one writes b again
    directory.unlink()
    shutil.move(tmp_path / "aside", directory)
    fold.apply(f.event(f.report("c", {"x": 2}, f"{ROOT}/c/c2", event_id="r-c")))
    fold.apply(f.event(f.finished("a", event_id="f-a")))  # a leaves the hot state: its entry is not written
    assert scheduler.start(fold, 6)
    await scheduler.wait()
    data = written(directory, 6)
    assert scheduler.last_offset == 6 and data == encode(of_fold(fold, PID.topic, 0, 6))
    assert sorted(decode(data).runs) == ["b", "c"] and len(scheduler.encodings) == 2


RUN = "given-back-run"


async def test_a_write_that_raises_something_unexpected_gives_its_changes_back(tmp_path: Path) -> None:
    """Not a CkptlogError (a bug, a cancellation): the chain's tip did not move, so the next delta must
    write the runs the failed one held."""
    store = SnapshotStore(str(tmp_path), PID.topic, PID.partition, keep=10)
    fold = Fold(SETTINGS, track_changes=True)
    fold.apply(f.event(f.started(RUN, f"{ROOT}/{RUN}", event_id="s-a")))
    scheduler = SnapshotScheduler(PID, store, 1, 3600, None, max_deltas=8)
    assert scheduler.start(fold, 1)
    await scheduler.wait()
    fold.apply(f.event(f.report(RUN, {"x": 1}, f"{ROOT}/{RUN}/c1", event_id="r-a")))
    real_write = store.write

    def broken(*args: object, **kwargs: object) -> str:
        raise RuntimeError("a bug in the store")

    store.write = broken  # type: ignore[method-assign]
    assert scheduler.start(fold, 2)
    try:
        await scheduler.wait()
    except RuntimeError:
        pass
    else:
        raise AssertionError("the write's error was swallowed")
    assert scheduler.last_offset == 1 and fold.changed == {RUN: None}
    store.write = real_write  # type: ignore[method-assign]
    assert scheduler.start(fold, 3)
    await scheduler.wait()
    directory = tmp_path / PID.topic / "0"
    names = [n for n in os.listdir(directory) if n.startswith(f"delta-{3:020d}-")]
    assert len(names) == 1 and scheduler.last_offset == 3  # a delta on the base at 1, holding the run
    assert RUN.encode() in (directory / names[0]).read_bytes()


async def test_a_written_snapshot_is_hashed_once_and_named_by_its_content(tmp_path: Path, monkeypatch: Any) -> None:
    """The seal's SHA-256 names the object too (it was computed twice: ~0.2 s of a core per 100 MB base)."""
    import hashlib

    store = SnapshotStore(str(tmp_path), PID.topic, PID.partition, keep=10)
    fold = Fold(SETTINGS, track_changes=True)
    for run in ("a", "b"):
        fold.apply(f.event(f.started(run, f"{ROOT}/{run}", event_id=f"s-{run}")))
    expected = encode(of_fold(fold, PID.topic, 0, 2))
    real, hashed = hashlib.sha256, []

    def counting(data: bytes = b"") -> Any:
        hashed.append(data == expected)
        return real(data)

    monkeypatch.setattr(hashlib, "sha256", counting)
    scheduler = SnapshotScheduler(PID, store, 1, 3600, None, max_deltas=0)
    assert scheduler.start(fold, 2)
    await scheduler.wait()
    monkeypatch.undo()
    assert hashed.count(True) == 1
    data = written(tmp_path / PID.topic / "0", 2)
    assert data == expected and (tmp_path / PID.topic / "0" / f"snapshot-{2:020d}-{content_digest(data)}.json").exists()
    assert store.load_latest(lambda chain, sha256s: chain) == [expected]  # verified against its name
