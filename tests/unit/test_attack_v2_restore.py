"""Attack: a schema 2 snapshot is restored without the runs refused for their root, and the fold
then silently diverges from a clean replay (contract §6, §7: the state after a restart equals a
clean replay of the same log).

Schema 3 added `refused` (contract §3: a run whose run_started was refused for its root is
refused until a corrected one; its other events are `run_refused`, "never folded as an implicit
run under another root"). A schema 2 snapshot has no such list, and `_refuse_shared_roots` only
stops the restore for implicit runs that already hold a root. A run whose run_started was
refused before the snapshot, and that sent nothing else before it, leaves no trace in a v2
snapshot: restored, its next report creates an implicit run under `{--storage-root}/{run id}`,
with checkpoints, outputs and deletions a clean replay never makes (it dead-letters them).
"""

from __future__ import annotations

import hashlib
import json

from events.decoded import CheckpointConfig
from processor.core import Fold, FoldSettings
from processor.core.snapshot import canonical, decode, encode, of_fold
from processor.kafka.records import PartitionId
from processor.service.restore import check_snapshot
from tests import factories as f

SETTINGS = FoldSettings(
    default_config=CheckpointConfig(num_to_keep=1), default_root="file:///sr", outer_root="file:///sr"
)


def _as_version_2(data: bytes) -> bytes:
    """The same state as a schema 2 build wrote it: no `refused`, no decode limits."""
    outer = json.loads(data)
    body = outer["snapshot"]
    del body["refused"]
    del body["settings"]["max_payload_bytes"], body["settings"]["max_depth"]
    digest = hashlib.sha256(canonical(body)).hexdigest()
    return canonical(
        {"checksum": f"sha256:{digest}", "format": "ckptlog.snapshot", "schema_version": 2, "snapshot": body}
    )


def test_a_v2_restore_forgets_a_refused_run_and_folds_it_as_an_implicit_one() -> None:
    before = [f.started("bad", "file:///elsewhere/bad", keep=1)]  # outside --storage-root: refused, and so is the run
    after = [f.report("bad", {}, "file:///sr/bad/c1"), f.report("bad", {}, "file:///sr/bad/c2")]

    clean = Fold(SETTINGS)
    for raw in before:
        assert clean.apply(f.event(raw)).rejection is not None
    snapshot = decode(_as_version_2(encode(of_fold(clean, "ckptlog.events", 0, len(before)))))  # read, no error
    settings = check_snapshot(PartitionId("ckptlog.events", 0), snapshot, SETTINGS, "file:///snapshots")
    restored = Fold(settings, snapshot.runs, refused=snapshot.refused)  # what restore() builds

    clean_reasons = [str(r.reason) for r in (clean.apply(f.event(raw)).rejection for raw in after) if r]
    restored_effects = [restored.apply(f.event(raw)) for raw in after]
    assert clean_reasons == ["run_refused", "run_refused"]
    assert [e.rejection for e in restored_effects] == [None, None] and restored_effects[1].deletions  # diverged
    assert restored.runs.keys() == clean.runs.keys(), "the restored fold holds a run a clean replay refuses"
