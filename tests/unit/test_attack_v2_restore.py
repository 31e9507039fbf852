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

import pytest

from ckptlog.errors import SnapshotVersionError
from ckptlog.events.decoded import CheckpointConfig
from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.core.snapshot import canonical, decode, encode, of_fold
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


def test_a_v2_snapshot_which_may_have_forgotten_a_refused_run_is_not_restored() -> None:
    """The attack: a refused run left no trace in a schema 2 snapshot, so its later reports were folded
    as an implicit run a clean replay refuses. Now no schema 2 snapshot is resumed."""
    before = [f.started("bad", "file:///elsewhere/bad", keep=1)]  # outside --storage-root: refused, and so is the run
    clean = Fold(SETTINGS)
    for raw in before:
        assert clean.apply(f.event(raw)).rejection is not None
    assert clean.refused == {"bad": clean.refused["bad"]}
    with pytest.raises(SnapshotVersionError, match="ckptlog replay"):
        decode(_as_version_2(encode(of_fold(clean, "ckptlog.events", 0, len(before)))))
