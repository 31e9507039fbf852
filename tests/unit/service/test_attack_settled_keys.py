"""Attack on `PartitionTask.deletions_settled`'s fast path (the outstanding key looked up as the deleter
spelled the path, `owed`'s first look inlined): a path of another run's, a kept path, another spelling, a
path confirmed twice, each for a restored state whose runs are dormant and for the same state built. The
completions written are the same either way, and name exactly the evictions the state owes (holds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ckptlog.events.codec import decode_event
from ckptlog.events.rejections import Rejection
from ckptlog.processor.core import Fold
from ckptlog.processor.core.run_codec import DormantRun
from ckptlog.processor.core.snapshot import decode, encode, of_fold
from ckptlog.processor.service.restore import restored_fold
from tests.unit.service.test_partition import LINES, idle, make_task, records


def _restored(fold: Fold, dormant: bool) -> Fold:
    snap = decode(encode(of_fold(fold, "in", 0, len(LINES))))
    if not dormant:
        for run in snap.runs.values():
            assert run.report_count >= 0
    assert all((type(run) is DormantRun) == dormant for run in snap.runs.values())
    return restored_fold(snap, snap.settings)  # as a restore builds it


def _completions(records_: list[Any]) -> list[tuple[str, list[tuple[str, int]], list[tuple[str, int]]]]:
    out = []
    for record in records_:
        event = decode_event(record.value, record.key)
        assert not isinstance(event, Rejection)
        data = event.data
        out.append(
            (
                event.subject,
                [(d.checkpoint_path, d.eviction) for d in data.deleted],  # type: ignore[union-attr]
                [(r.checkpoint_path, r.eviction) for r in data.refused],  # type: ignore[union-attr]
            )
        )
    return out


@pytest.mark.parametrize("dormant", [True, False], ids=["dormant", "built"])
async def test_completions_of_a_restored_state_name_only_what_each_run_owes(tmp_path: Path, dormant: bool) -> None:
    seed, _, _, _ = make_task(tmp_path / "seed")
    await seed.process(records(LINES))
    await idle(seed)
    owed = {run: list(seed.fold.runs[run].outstanding.items()) for run in ("run-0", "run-1")}
    kept = {run: [r.path for r in seed.fold.runs[run].checkpoints] for run in ("run-0", "run-1")}
    (a_key, a), (b_key, b) = owed["run-0"][0], owed["run-1"][0]
    await seed.close(graceful=True)
    task, _, _, _ = make_task(
        tmp_path / "task", start=len(LINES), publish_from=len(LINES), fold=_restored(seed.fold, dormant)
    )
    done = [
        ("run-0", b.path),  # another run's owed path
        ("run-0", kept["run-0"][0]),  # a kept path
        ("run-0", a.path.replace("file:///", "file:////") + "/"),  # its owed path, spelled otherwise
        ("run-1", b_key),  # its owed key
        ("run-0", a.path),  # confirmed twice
    ]
    refused = [(("run-1", a.path), "another run's"), (("run-1", kept["run-1"][0]), "kept")]
    got = _completions(task.deletions_settled(done, refused))
    respelled = a.path.replace("file:///", "file:////") + "/"
    assert got == [("run-0", [(respelled, a.eviction), (a.path, a.eviction)], []), ("run-1", [(b_key, b.eviction)], [])]
    assert a_key == a.path
    await task.close(graceful=True)
