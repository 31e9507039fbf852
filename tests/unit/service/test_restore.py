"""Restore decisions: where to seek, what to publish again, when to refuse."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from ckptlog.errors import OffsetOutOfRange, SnapshotVersionError
from ckptlog.events.decoded import CheckpointConfig
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.core.chain import Chain
from ckptlog.processor.core.delta import Capture, sha256_hex
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.snapshot import SCHEMA_VERSION, Snapshot, canonical, encode, of_fold
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.service.errors import RestoreError
from ckptlog.processor.service.restore import restore
from ckptlog.processor.service.snapshotting import SnapshotScheduler
from ckptlog.processor.storage.snapshots import SnapshotStore
from tests import factories as f

PID = PartitionId("events", 0)
SETTINGS = FoldSettings()


class Offsets:
    def __init__(self, start: int, end: int, committed: int | None) -> None:
        self.start, self.end, self.commit = start, end, committed

    async def log_start(self, pid: PartitionId) -> int:
        return self.start

    async def log_end(self, pid: PartitionId) -> int:
        return self.end

    async def committed(self, pid: PartitionId) -> int | None:
        return self.commit


def store_with(tmp_path: Path, next_offset: int | None, settings: FoldSettings = SETTINGS) -> SnapshotStore:
    store = SnapshotStore(str(tmp_path), PID.topic, PID.partition)
    if next_offset is not None:
        store.write(encode(Snapshot(PID.topic, PID.partition, next_offset, settings, Fold(settings).runs)), next_offset)
    return store


async def test_fresh_partition_replays_from_zero_and_publishes_after_committed(tmp_path: Path) -> None:
    restored = await restore(PID, Offsets(0, 50, 30), store_with(tmp_path, None), SETTINGS, False)
    assert (restored.start, restored.publish_from, restored.snapshot_offset) == (0, 30, None)


async def test_snapshot_then_replay_up_to_committed(tmp_path: Path) -> None:
    restored = await restore(PID, Offsets(0, 50, 40), store_with(tmp_path, 25), SETTINGS, False)
    assert (restored.start, restored.publish_from, restored.snapshot_offset) == (25, 40, 25)
    no_group = await restore(PID, Offsets(0, 50, None), store_with(tmp_path, 25), SETTINGS, False)
    assert (no_group.start, no_group.publish_from, no_group.snapshot_offset) == (0, 0, None)  # nothing is known
    # to be published: the snapshot would skip outputs, so the fold starts from the log start


async def test_a_snapshot_ahead_of_the_committed_offset_is_passed_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 13 case 3: `ckptlog replay` wrote its snapshot at the log end, ahead of the group's
    committed offset, and a restore from it never published the outputs in between."""
    store = store_with(tmp_path, 10)
    store.write(encode(Snapshot(PID.topic, PID.partition, 30, SETTINGS, Fold(SETTINGS).runs)), 30)
    restored = await restore(PID, Offsets(0, 50, 20), store, SETTINGS, False)
    assert (restored.start, restored.publish_from, restored.snapshot_offset) == (10, 20, 10)
    assert "snapshot_ahead_of_committed" in caplog.text


async def test_truncated_log_is_refused_with_both_offsets(tmp_path: Path) -> None:
    with pytest.raises(OffsetOutOfRange, match=r"events\[0\].*offset 25.*starts at offset 30.*--allow-data-loss"):
        await restore(PID, Offsets(30, 50, 40), store_with(tmp_path, 25), SETTINGS, False)
    with pytest.raises(OffsetOutOfRange, match="no snapshot"):
        await restore(PID, Offsets(5, 50, None), store_with(tmp_path / "none", None), SETTINGS, False)


async def test_allow_data_loss_continues_from_the_log_start(tmp_path: Path) -> None:
    restored = await restore(PID, Offsets(30, 50, 40), store_with(tmp_path, 25), SETTINGS, True)
    assert (restored.start, restored.publish_from) == (30, 40)


async def test_snapshot_beyond_the_log_or_with_other_settings_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RestoreError, match="beyond the log's end"):
        await restore(PID, Offsets(0, 10, 25), store_with(tmp_path / "a", 25), SETTINGS, False)
    other = FoldSettings(default_config=CheckpointConfig(num_to_keep=2))
    with pytest.raises(RestoreError, match="other processor defaults: --default-num-to-keep.*ckptlog replay"):
        await restore(PID, Offsets(0, 50, 25), store_with(tmp_path / "b", 25, other), SETTINGS, False)


async def test_the_same_storage_root_spelled_differently_restores(tmp_path: Path) -> None:
    """Issue 17 item 2: `/tmp/x/runs` after `file:///tmp/x/runs` is the same directory; the fold goes
    on with the snapshot's spelling, so it continues exactly as it was."""
    before = FoldSettings(default_root="file:///tmp/x/runs", outer_root="file:///tmp/x/runs")
    now = FoldSettings(default_root="/tmp/x//runs/", outer_root="/tmp/x//runs/")
    restored = await restore(PID, Offsets(0, 50, 25), store_with(tmp_path, 25, before), now, False)
    assert restored.snapshot_offset == 25 and restored.fold.settings == before


async def test_other_settings_name_only_the_field_that_differs(tmp_path: Path) -> None:
    before = FoldSettings(default_root="file:///tmp/x/runs", outer_root="file:///tmp/x/runs")
    now = FoldSettings(
        default_config=CheckpointConfig(checkpoint_score_order="min"),
        default_root="/tmp/x/runs",
        outer_root="/tmp/x/runs",
    )
    with pytest.raises(RestoreError) as caught:
        await restore(PID, Offsets(0, 50, 25), store_with(tmp_path, 25, before), now, False)
    message = str(caught.value)
    assert "--score-order 'max' in the snapshot, 'min' now" in message
    assert "storage-root" not in message and "FoldSettings" not in message and len(message) < 400
    moved = FoldSettings(default_root="/tmp/y", outer_root="/tmp/y")
    with pytest.raises(RestoreError) as caught:
        await restore(PID, Offsets(0, 50, 25), store_with(tmp_path, 25, before), moved, False)
    assert "--storage-root 'file:///tmp/x/runs' in the snapshot, 'file:///tmp/y' now." in str(caught.value)
    assert "outer bound" not in str(caught.value)


@pytest.mark.parametrize(
    ("flag", "limits"), [("--max-depth", {"max_depth": 10}), ("--max-payload-bytes", {"max_payload_bytes": 300})]
)
async def test_a_snapshot_folded_with_other_decode_limits_is_refused(
    tmp_path: Path, flag: str, limits: dict[str, int]
) -> None:
    """Issue 20 #8: the limits decide which records are applied, so a restart with others cannot
    continue from a state a clean replay under them would not build."""
    now = FoldSettings(**limits)  # type: ignore[arg-type]
    with pytest.raises(RestoreError, match=rf"{flag} \d+ in the snapshot, \d+ now"):
        await restore(PID, Offsets(0, 50, 25), store_with(tmp_path, 25), now, False)
    same = await restore(PID, Offsets(0, 50, 25), store_with(tmp_path / "same", 25, now), now, False)
    assert same.fold.settings == now


async def test_a_version_2_snapshot_stops_the_restore(tmp_path: Path) -> None:
    """Schema 2 was folded under older rules: the restore stops with the command that rebuilds it."""
    outer = json.loads(encode(Snapshot(PID.topic, PID.partition, 25, SETTINGS, {})))
    body = outer["snapshot"]
    del body["refused"], body["settings"]["max_payload_bytes"], body["settings"]["max_depth"]
    digest = hashlib.sha256(canonical(body)).hexdigest()
    old = canonical(
        {"checksum": f"sha256:{digest}", "format": "ckptlog.snapshot", "schema_version": 2, "snapshot": body}
    )
    store = SnapshotStore(str(tmp_path), PID.topic, PID.partition)
    store.write(old, 25)
    with pytest.raises(SnapshotVersionError, match="ckptlog replay"):
        await restore(PID, Offsets(0, 50, 25), store, FoldSettings(), False)


def _written_chain(store: SnapshotStore, deltas: int) -> Fold:
    """A base at 10 and `deltas` deltas (at 20, 30, ...) of a fold changing one run of thirty between them."""
    fold = Fold(SETTINGS, track_changes=True)
    chain = None
    for n in range(deltas + 1):
        runs = ["a", "b", *map(str, range(28))] if n == 0 else ["a"]
        for run in runs:
            fold.apply(f.event(f.report(run, {"n": n}, event_id=f"{run}{n}")))
        capture = Capture(fold, PID.topic, PID.partition, 10 * (n + 1), chain)
        while capture.step():
            pass
        data = capture.encoded()
        link = None if chain is None else (chain.tip_offset, chain.tip_sha256[:12])
        store.write(data, 10 * (n + 1), link)
        at, digest = 10 * (n + 1), sha256_hex(data)
        chain = (
            Chain.based(at, digest, len(data), SCHEMA_VERSION)
            if chain is None
            else chain.extended(at, digest, len(data))
        )
    return fold


async def test_a_restore_from_a_chain_hands_it_on_and_the_next_snapshot_is_a_delta_on_it(tmp_path: Path) -> None:
    store = SnapshotStore(str(tmp_path), PID.topic, PID.partition, keep=10)
    live = _written_chain(store, 2)
    restored = await restore(PID, Offsets(0, 50, 35), store, SETTINGS, False)
    assert restored.snapshot_offset == 30 and restored.chain is not None and restored.chain.deltas == 2
    assert restored.fold.changed == {} and encode(of_fold(restored.fold, PID.topic, 0, 30)) == encode(
        of_fold(live, PID.topic, 0, 30)
    )
    restored.fold.apply(f.event(f.report("b", {"n": 9}, event_id="b9")))
    scheduler = SnapshotScheduler(PID, store, 1, 3600, 30, chain=restored.chain, max_deltas=8)
    assert scheduler.start(restored.fold, 31)
    await scheduler.wait()
    newest = [n for n in os.listdir(tmp_path / PID.topic / "0") if n.startswith("delta-00000000000000000031-")]
    assert len(newest) == 1 and newest[0].endswith(f"-on-{30:020d}-{restored.chain.tip_sha256[:12]}.json")
    again = await restore(PID, Offsets(0, 50, 31), store, SETTINGS, False)
    assert again.chain is not None and again.chain.deltas == 3
    assert encode(of_fold(again.fold, PID.topic, 0, 31)) == encode(of_fold(restored.fold, PID.topic, 0, 31))


async def test_a_final_snapshot_is_a_delta_on_a_chain_a_scheduled_one_would_compact(tmp_path: Path) -> None:
    """A revocation's or a stop's snapshot (`final`) goes on the chain even when it is at its bound,
    where a scheduled one writes a base; the next owner restores the longer chain exactly, and its
    own first scheduled snapshot compacts."""
    store = SnapshotStore(str(tmp_path), PID.topic, PID.partition, keep=10)
    _written_chain(store, 2)
    restored = await restore(PID, Offsets(0, 50, 35), store, SETTINGS, False)
    assert restored.chain is not None and not restored.chain.takes_delta(2, SCHEMA_VERSION)
    restored.fold.apply(f.event(f.report("b", {"n": 9}, event_id="b9")))
    scheduler = SnapshotScheduler(PID, store, 1, 3600, 30, chain=restored.chain, max_deltas=2)
    assert scheduler.start(restored.fold, 31, final=True)
    await scheduler.wait()
    assert scheduler.chain is not None and scheduler.chain.deltas == 3 and scheduler.chain.base_offset == 10
    again = await restore(PID, Offsets(0, 50, 31), store, SETTINGS, False)
    assert again.chain == scheduler.chain
    assert encode(of_fold(again.fold, PID.topic, 0, 31)) == encode(of_fold(restored.fold, PID.topic, 0, 31))
    again.fold.apply(f.event(f.report("a", {"n": 10}, event_id="a10")))
    next_owner = SnapshotScheduler(PID, store, 1, 3600, 31, chain=again.chain, max_deltas=2)
    assert next_owner.start(again.fold, 32)
    await next_owner.wait()
    assert next_owner.chain is not None and next_owner.chain.deltas == 0 and next_owner.chain.base_offset == 32


async def test_a_snapshot_of_an_older_schema_is_restored_and_followed_by_a_new_base(tmp_path: Path) -> None:
    """A chain is only ever built on a base of this build's schema: deltas hold this build's run records."""
    outer = json.loads(encode(Snapshot(PID.topic, PID.partition, 25, SETTINGS, {})))
    body = outer["snapshot"]
    del body["finished"], body["settings"]["finished_runs_kept"]  # as schema 3 wrote it
    digest = hashlib.sha256(canonical(body)).hexdigest()
    store = SnapshotStore(str(tmp_path), PID.topic, PID.partition)
    store.write(
        canonical(
            {"checksum": f"sha256:{digest}", "format": "ckptlog.snapshot", "schema_version": 3, "snapshot": body}
        ),
        25,
    )
    restored = await restore(PID, Offsets(0, 50, 25), store, SETTINGS, False)
    assert restored.chain is not None and restored.chain.schema_version == 3
    restored.fold.apply(f.event(f.report("a", {}, event_id="a")))
    scheduler = SnapshotScheduler(PID, store, 1, 3600, 25, chain=restored.chain, max_deltas=8)
    assert scheduler.start(restored.fold, 26)
    await scheduler.wait()
    assert scheduler.chain is not None and scheduler.chain.deltas == 0 and scheduler.chain.base_offset == 26
    assert not any(n.startswith("delta-") for n in os.listdir(tmp_path / PID.topic / "0"))
