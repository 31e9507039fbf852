"""Attack on dormant runs (contract §6 *What a restore checks, and dormant runs*, core/run_codec.py
`DormantRun`): an entry the restore lets through must build, so that a dormant run never breaks the
partition at its first use; and every reader gets the same answer from a dormant run as from it built.

Found: a kept list longer than `ordering.PROMOTE_AT` whose last report index does not fit the kept
list's 64-bit tie-breaks (`2**63`) restored dormant, then its first event failed to build it
(OverflowError, as `SnapshotCorrupt`: the partition broken, and again after each restore). Before the
dormant runs (0d45ccd) the same snapshot raised OverflowError out of `decode` (not even a corrupt
snapshot). Fixed: a report index is refused at restore unless 0 <= it < 2**62, the range the fold's
counter and the kept list's `(value, 2**62 | report_index)` keys hold (run_codec.CheckpointEntry).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from typing import Any

import pytest

from ckptlog.errors import SnapshotCorrupt
from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.core.delta import Capture, decode_chain
from ckptlog.processor.core.ordering import PROMOTE_AT
from ckptlog.processor.core.run_codec import DormantRun, run_out
from ckptlog.processor.core.snapshot import decode, encode, of_fold
from ckptlog.processor.core.state import RunState
from tests import factories as f
from tests.unit.core.test_restore_paths import _sealed, busy_fold

ROOT = "file:///d"


def _long_entry(count: int, last_index: int) -> dict[str, Any]:
    """A snapshot body whose run r keeps `count` checkpoints in sort order, the best (last) reported
    at `last_index`."""
    fold = Fold(FoldSettings(default_root=ROOT))
    for line in (f.started("r", f"{ROOT}/r", attr="acc"), f.report("r", {"acc": 0.5}, f"{ROOT}/r/a")):
        assert fold.apply(f.event(line)).rejection is None
    body: dict[str, Any] = json.loads(encode(of_fold(fold, "t", 0, 9)))["snapshot"]
    entry, first = body["runs"]["r"], body["runs"]["r"]["checkpoints"][0]
    entry["checkpoints"] = [
        {**first, "path": f"{ROOT}/r/c{i}", "key": f"{ROOT}/r/c{i}", "metrics": {"acc": i}, "report_index": i}
        for i in range(count - 1)
    ] + [{**first, "path": f"{ROOT}/r/z", "key": f"{ROOT}/r/z", "metrics": {"acc": count}, "report_index": last_index}]
    entry.update(latest=f"{ROOT}/r/z", pending=[], report_count=count)
    return body


@pytest.mark.parametrize("count", [3, PROMOTE_AT + 2])
@pytest.mark.parametrize("last_index", [2**62, 2**63, -1, -(2**63) - 1])
def test_a_report_index_the_kept_list_cannot_hold_makes_the_snapshot_corrupt(count: int, last_index: int) -> None:
    body = _long_entry(count, last_index)
    try:
        snap = decode(_sealed(body))
    except SnapshotCorrupt as exc:
        assert "report_index" in str(exc)
        return
    run = snap.runs["r"]
    _ = run.by_key  # built: it must not fail now, at the run's first use
    pytest.fail(f"report index {last_index} restored ({type(run).__name__} built): not a state the fold makes")


def test_a_long_kept_list_in_range_restores_dormant_and_builds() -> None:
    data = _sealed(_long_entry(PROMOTE_AT + 2, PROMOTE_AT + 1))
    snap = decode(data)
    run = snap.runs["r"]
    assert type(run) is DormantRun and run.live_counts() == (PROMOTE_AT + 2, 0, 0)
    kept = run.kept_paths()
    assert len(run.by_key) == PROMOTE_AT + 2 and type(run) is RunState
    assert run.kept_paths() == kept and encode(snap) == data


def _readers(run: RunState) -> tuple[Any, ...]:
    return (run.kept_paths(), list(run.owed_evictions()), run.live_counts(), run_out(run), run.root, run.reopened)


def test_every_reader_answers_a_dormant_run_as_the_built_one() -> None:
    """`kept_paths`, `owed_evictions`, `live_counts`, `run_out`, the root and lifecycle: the same from an
    unbuilt run and the run built; repr, copy, pickle and dataclass field reads build it first."""
    data = encode(of_fold(busy_fold(), "t", 0, 9))
    lazy, built = decode(data), decode(data)
    for run in built.runs.values():
        assert run.report_count >= 0
    for run_id, run in lazy.runs.items():
        assert type(run) is DormantRun
        assert _readers(run) == _readers(built.runs[run_id]), run_id
        assert type(run) is DormantRun, f"{run_id}: a reader built it"
    for build in (repr, copy.copy, copy.deepcopy, lambda r: pickle.loads(pickle.dumps(r))):
        lazy = decode(data)
        run = lazy.runs["r"]
        out = build(run)
        assert type(run) is RunState and run_out(run) == run_out(built.runs["r"]), build
        if isinstance(out, RunState):
            assert type(out) is RunState and run_out(out) == run_out(built.runs["r"])
    assert encode(lazy) == data


def test_dataclass_helpers_see_a_dormant_run_as_the_built_one() -> None:
    """`dataclasses.replace` builds it first (the same state); `asdict` fails alike on both (a RunState's
    `entry` slot is unset once built); `vars` has no dict on either; equality is identity on both."""
    data = encode(of_fold(busy_fold(), "t", 0, 9))
    built = decode(data).runs["r"]
    assert built.report_count >= 0
    lazy = decode(data).runs["r"]
    assert dataclasses.fields(lazy) == dataclasses.fields(built) and type(lazy) is DormantRun
    assert lazy != built and lazy == lazy
    copied = dataclasses.replace(lazy)
    assert type(lazy) is RunState and run_out(copied) == run_out(built)
    for run in (decode(data).runs["r"], built):
        with pytest.raises(AttributeError):
            dataclasses.asdict(run)
        with pytest.raises(TypeError):
            vars(run)


def _taken(capture: Capture) -> bytes:
    while capture.step():
        pass
    return capture.encoded()


def test_restored_twice_across_a_crash_a_dormant_fold_ends_as_the_fold_never_restored() -> None:
    """A base; restored dormant, a few events, a delta (its runs untouched still dormant), then a crash
    (the fold dropped); the chain restored dormant again, the rest folded: the effects and the final
    base are those of the fold that never stopped."""
    lines = [
        f.report("r", {"acc": 0.95}, f"{ROOT}/r/f"),
        f.settled("r", [(f"{ROOT}/r/c/deep", 0)]),
        f.report("new", {"acc": 1}, f"{ROOT}/new/a"),
        f.report("r", {"acc": 0.2}, f"{ROOT}/r/g"),
        f.finished("r"),
        f.reopened("done"),
        f.report("done", {"acc": 3}, f"{ROOT}/done/two"),
    ]
    original = busy_fold()
    base = _taken(Capture(original, "t", 0, 5, None))
    first = decode_chain([base])
    restored = Fold(first.settings, first.runs, finished=first.finished, retired=first.retired, track_changes=True)
    for line in lines[:3]:
        assert restored.apply(f.event(line)) == original.apply(f.event(line)), line
    assert f"{ROOT}/r/c/deep" not in restored.runs["r"].outstanding, "the settlement settled"
    delta = _taken(Capture(restored, "t", 0, 8, first.chain))
    del restored  # the crash
    again = decode_chain([base, delta])
    assert {run_id for run_id, run in again.runs.items() if type(run) is DormantRun} == set(again.runs)
    fold = Fold(again.settings, again.runs, finished=again.finished, retired=again.retired, track_changes=True)
    for line in lines[3:]:
        assert fold.apply(f.event(line)) == original.apply(f.event(line)), line
    assert encode(of_fold(fold, "t", 0, 12)) == encode(of_fold(original, "t", 0, 12))
