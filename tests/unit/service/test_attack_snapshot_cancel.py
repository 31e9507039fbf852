"""Attack on the entries a base reuses (contract §6 *Encodings kept*): the scheduler's snapshot is
cancelled (a revocation, a stop) at every point of its life — before encoding, mid-encode with the
fold changing runs under it, while sealing in its worker thread — and the fold goes on. Every base
written after is byte for byte the full snapshot of its moment, in a real local directory."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from ckptlog.processor.core import Fold
from ckptlog.processor.core.snapshot import encode, of_fold
from ckptlog.processor.service.snapshotting import SnapshotScheduler
from ckptlog.processor.storage.snapshots import SnapshotStore
from tests import factories as f
from tests.unit.core.test_fold_properties import ROOT, SETTINGS
from tests.unit.service.test_snapshot_encodings import PID, written

RUNS = [f"run-{n:02d}" for n in range(12)]


class HeldStore(SnapshotStore):
    """Its writes wait for `released`, so a snapshot is still in flight when the test cancels it, however
    fast the host seals it (the ticks only choose the stage it is cancelled in)."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(str(tmp_path), PID.topic, PID.partition, keep=10)
        self.released = threading.Event()
        self.released.set()

    def write(
        self, data: bytes, next_offset: int, on: tuple[int, str] | None = None, *, sha256: str | None = None
    ) -> str:
        assert self.released.wait(30), "the test never released the write"
        return super().write(data, next_offset, on, sha256=sha256)


@pytest.mark.parametrize("ticks", [0, 1, 2, 3, 5, 8, 13, 40])
async def test_a_snapshot_cancelled_at_any_point_leaves_the_next_base_exact(tmp_path: Path, ticks: int) -> None:
    store = HeldStore(tmp_path)
    fold = Fold(SETTINGS, track_changes=True)
    offset = 0

    def event(raw: bytes) -> None:
        nonlocal offset
        fold.apply(f.event(raw))
        offset += 1

    for run in RUNS:
        event(f.started(run, f"{ROOT}/{run}", event_id=f"s-{run}"))
    scheduler = SnapshotScheduler(PID, store, 1, 3600, None, max_deltas=0)  # every snapshot a base
    assert scheduler.start(fold, offset)
    await scheduler.wait()  # a base: every entry kept
    for n, run in enumerate(RUNS[:4]):
        event(f.report(run, {"x": n}, f"{ROOT}/{run}/c{n}", event_id=f"r0-{run}"))
    store.released.clear()
    assert scheduler.start(fold, offset)
    task = scheduler._inflight
    assert task is not None
    for tick in range(ticks):  # the fold goes on while the snapshot is encoded and sealed
        run = RUNS[tick % len(RUNS)]
        event(f.report(run, {"x": 100 + tick}, f"{ROOT}/{run}/t{tick}", event_id=f"t{tick}-{run}"))
        await asyncio.sleep(0)
    assert not task.done()
    task.cancel()
    store.released.set()
    with pytest.raises(asyncio.CancelledError):
        await scheduler.wait()
    event(f.finished(RUNS[5], event_id="f-5"))
    event(f.report(RUNS[6], {"x": 7}, f"{ROOT}/{RUNS[6]}/late", event_id="late-6"))
    assert scheduler.start(fold, offset)
    await scheduler.wait()
    assert written(tmp_path / PID.topic / "0", offset) == encode(of_fold(fold, PID.topic, 0, offset))
