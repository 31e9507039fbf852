"""Attack: a crafted or unusual snapshot (valid checksum) whose re-drive would delete a kept checkpoint
(contract §6 *What a restore checks*, §9), restored dormant (run_codec.DormantRun) and built.

The re-drive hands `Fold.owed()` to the real Deleter, whose check 3 is `lifecycle.deletion_problem`
(as service/partition.py asks it), on a real directory tree. Whatever the snapshot says, a kept
checkpoint's directory must survive: either the restore refuses the snapshot as corrupt, or the
deleter drops the deletion.

Found: an outstanding key spelled `{root}//b` or `{root}/./b` (b kept, the run's best) was deleted: the
re-check took the outstanding key as written for the key (`_key_of`'s first test, and the fast path of
`deletion_problem`), while the deleter removes its canonical spelling, `{root}/b`. Likewise a kept key
spelled otherwise than its canonical path: the eviction of `{root}/b` deleted the kept `{root}//b`.
The same before the dormant runs (0d45ccd): no restore check looked at the keys' spellings. Fixed: a
restore checks that each key is a canonical spelling strictly under the run's root and that its path
spells it (run_codec `_check_keys`), for dormant and built runs alike; such a snapshot is corrupt.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ckptlog.errors import SnapshotCorrupt
from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.core.lifecycle import deletion_problem
from ckptlog.processor.core.run_codec import DormantRun
from ckptlog.processor.core.snapshot import Snapshot, decode, encode, of_fold
from ckptlog.processor.core.state import RunState
from ckptlog.processor.service.restore import restored_fold
from ckptlog.processor.storage.deletion import Deleter
from tests import factories as f
from tests.unit.core.test_restore_paths import _sealed

Change = Callable[[dict[str, Any], str], None]


def _tree(tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """Run r keeps b (best) and c, owes a; run r2 (a root r is a prefix of, as a string) keeps x."""
    for run, names in (("r", "abcd"), ("r2", "x")):
        for name in names:
            (tmp_path / run / name).mkdir(parents=True)
            (tmp_path / run / name / "w.bin").write_bytes(b"w")
    root = tmp_path.as_uri()
    fold = Fold(FoldSettings(default_root=root, outer_root=root), track_changes=True)
    lines = [
        f.started("r", f"{root}/r", keep=2, attr="acc"),
        f.report("r", {"acc": 0.5}, f"{root}/r/a"),
        f.report("r", {"acc": 0.9}, f"{root}/r/b"),
        f.report("r", {"acc": 0.7}, f"{root}/r/c"),
        f.started("r2", f"{root}/r2", keep=2, attr="acc"),
        f.report("r2", {"acc": 0.7}, f"{root}/r2/x"),
    ]
    for line in lines:
        assert fold.apply(f.event(line)).rejection is None, line
    body = json.loads(encode(of_fold(fold, "t", 0, 9)))["snapshot"]
    assert body["runs"]["r"]["outstanding"] == [[f"{root}/r/a", f"{root}/r/a", 0]]
    return root, body


def _redriven(snap: Snapshot) -> tuple[list[Any], list[Any]]:
    """What a restore's re-drive does with the snapshot: every owed deletion through the real Deleter,
    its check 3 the fold's `deletion_problem`."""
    fold = restored_fold(snap, snap.settings)  # as a restore builds it

    async def run() -> tuple[list[Any], list[Any]]:
        done: list[Any] = []
        refused: list[Any] = []
        deleter = Deleter(
            outer_root=snap.settings.outer_root,
            recheck=lambda key: deletion_problem(fold.runs.get(key[0]), key[1]),
            on_done=done.extend,
            on_refused=refused.extend,
        )
        deleter.submit_many([d for d in fold.owed() if d.root])
        await deleter.drain()
        await deleter.close()
        return done, refused

    return asyncio.run(run())


def _owe(spelling: str) -> Change:
    def change(entry: dict[str, Any], root: str) -> None:
        path = spelling.format(root=f"{root}/r")
        entry["outstanding"].append([path, path, 7])

    return change


def _kept_as(spelling: str) -> Change:
    """The kept b's key (and path) spelled otherwise, and b owed under its canonical spelling."""

    def change(entry: dict[str, Any], root: str) -> None:
        hostile = spelling.format(root=f"{root}/r")
        for checkpoint in entry["checkpoints"]:
            if checkpoint["key"] == f"{root}/r/b":
                checkpoint.update(key=hostile, path=hostile)
        entry.update(latest=hostile)
        entry["outstanding"].append([f"{root}/r/b", f"{root}/r/b", 7])

    return change


def _owe_kept(entry: dict[str, Any], root: str) -> None:
    entry["outstanding"].append([f"{root}/r/b", f"{root}/r/b", 7])


def _owe_other_runs(entry: dict[str, Any], root: str) -> None:
    entry["outstanding"].append([f"{root}/r2/x", f"{root}/r2/x", 7])


def _owe_under_prefix_sibling(entry: dict[str, Any], root: str) -> None:
    entry["outstanding"].append([f"{root}/r2", f"{root}/r2", 7])  # `{root}/r` is a prefix of it as a string


def _owe_path_of_kept(entry: dict[str, Any], root: str) -> None:
    entry["outstanding"].append([f"{root}/r/zz", f"{root}/r/b", 7])  # its own key, a kept one's path


def _owe_root(entry: dict[str, Any], root: str) -> None:
    entry["outstanding"].append([f"{root}/r", f"{root}/r", 7])


CHANGES: dict[str, Change] = {
    "an owed key spelled r//b": _owe("{root}//b"),
    "an owed key spelled r/./b": _owe("{root}/./b"),
    "an owed key spelled r/b/": _owe("{root}/b/"),
    "an owed key spelled r/b//": _owe("{root}/b//"),
    "an owed key spelled /.../r/b (no protocol)": lambda entry, root: _owe("{root}/b")(entry, root[len("file://") :]),
    "an owed key spelled FILE://.../r/b": lambda entry, root: _owe("{root}/b")(entry, "FILE" + root[len("file") :]),
    "a kept key spelled r//b, b owed": _kept_as("{root}//b"),
    "a kept key spelled r/./b, b owed": _kept_as("{root}/./b"),
    "an owed key that is a kept one": _owe_kept,
    "an owed path that is a kept one's": _owe_path_of_kept,
    "an owed path in another run's root": _owe_other_runs,
    "an owed path whose root string has r as a prefix": _owe_under_prefix_sibling,
    "the run's root owed": _owe_root,
}

KEPT = ("r/b", "r/c", "r2/x")


@pytest.mark.parametrize("touched", [False, True], ids=["dormant", "built"])
@pytest.mark.parametrize("case", sorted(CHANGES))
def test_a_crafted_snapshot_never_gets_a_kept_checkpoint_deleted(tmp_path: Path, case: str, touched: bool) -> None:
    root, body = _tree(tmp_path)
    CHANGES[case](body["runs"]["r"], root)
    try:
        snap = decode(_sealed(body))
    except SnapshotCorrupt:
        snap = None  # refused at restore: nothing re-driven
    if snap is not None:
        for run in snap.runs.values():
            if touched:
                assert run.report_count >= 0 and type(run) is RunState
        if not touched:
            assert all(type(run) in (DormantRun, RunState) for run in snap.runs.values())
        _redriven(snap)
    gone = [kept for kept in KEPT if not (tmp_path / kept / "w.bin").exists()]
    assert not gone, f"{case}: a kept checkpoint was deleted by the re-drive: {gone}"
    assert (tmp_path / "r").is_dir() and (tmp_path / "r2").is_dir()


HOSTILE = [case for case in CHANGES if "spelled" in case]


@pytest.mark.parametrize("case", HOSTILE)
def test_a_key_spelled_otherwise_makes_the_snapshot_corrupt_naming_the_run(tmp_path: Path, case: str) -> None:
    root, body = _tree(tmp_path)
    CHANGES[case](body["runs"]["r"], root)
    with pytest.raises(SnapshotCorrupt, match=r"run 'r': checkpoint key .* not the canonical spelling"):
        decode(_sealed(body))


def test_a_key_the_regex_leaves_to_a_parse_still_restores(tmp_path: Path) -> None:
    """Canonical keys the fast regex does not vouch for (a non-ASCII segment), and paths reported in
    another spelling than their key, restore as they are (dormant, the same bytes)."""
    root = tmp_path.as_uri()
    fold = Fold(FoldSettings(default_root=root), track_changes=True)
    for line in (
        f.started("r", f"{root}/r", keep=1, attr="acc"),
        f.report("r", {"acc": 0.5}, f"{root}/r//caf\u00e9/"),
        f.report("r", {"acc": 0.9}, f"{root}/r/./b//"),
    ):
        assert fold.apply(f.event(line)).rejection is None, line
    run = fold.runs["r"]
    assert [r.key for r in run.checkpoints] == [f"{root}/r/b"] and list(run.outstanding) == [f"{root}/r/caf\u00e9"]
    data = encode(of_fold(fold, "t", 0, 9))
    snap = decode(data)
    assert type(snap.runs["r"]) is DormantRun and encode(snap) == data


def test_a_retired_state_with_a_hostile_key_never_gets_its_kept_checkpoint_deleted(tmp_path: Path) -> None:
    """A finished run's retired state (a snapshot's `retired`, decoded only when the run is reopened)
    owing `root//one` beside its kept `root/one`: reopened, then a restore re-drives what it owes."""
    (tmp_path / "done" / "one").mkdir(parents=True)
    (tmp_path / "done" / "one" / "w.bin").write_bytes(b"w")
    root = tmp_path.as_uri()
    fold = Fold(FoldSettings(default_root=root, outer_root=root), track_changes=True)
    for line in (
        f.started("done", f"{root}/done", keep=1, attr="acc"),
        f.report("done", {"acc": 1}, f"{root}/done/one"),
        f.finished("done"),
    ):
        assert fold.apply(f.event(line)).rejection is None, line
    body = json.loads(encode(of_fold(fold, "t", 0, 9)))["snapshot"]
    hostile = f"{root}/done//one"
    body["retired"]["done"]["outstanding"] = [[hostile, hostile, 7]]
    snap = decode(_sealed(body))
    reopened = Fold(snap.settings, snap.runs, finished=snap.finished, retired=snap.retired, track_changes=True)
    effects = reopened.apply(f.event(f.reopened("done")))
    if effects.rejection is None:  # reopened: its state goes on to the next snapshot, and a restore re-drives it
        _redriven(decode(encode(of_fold(reopened, "t", 0, 10))))  # this build's own snapshot must restore
    else:
        assert effects.rejection.reason == "internal_error" and "done//one" in str(effects.rejection), effects.rejection
    assert (tmp_path / "done" / "one" / "w.bin").exists(), "the reopened run's kept checkpoint was deleted"


@pytest.mark.parametrize("touched", [False, True], ids=["dormant", "built"])
def test_a_run_also_refused_for_a_link_to_its_root_deletes_nothing_through_the_link(
    tmp_path: Path, touched: bool
) -> None:
    """A crafted snapshot holding run r in `runs` (owing r/a) and in `symlinked`, its root a link to a
    tree outside the storage root: the re-drive goes nowhere through the link."""
    root, body = _tree(tmp_path / "store")
    outside = tmp_path / "outside"
    (tmp_path / "store" / "r").rename(outside)
    (tmp_path / "store" / "r").symlink_to(outside, target_is_directory=True)
    body["symlinked"] = {"r": f"{root}/r"}
    snap = decode(_sealed(body))
    if touched:
        assert snap.runs["r"].report_count >= 0
    assert (type(snap.runs["r"]) is DormantRun) != touched
    _redriven(snap)
    assert sorted(p.name for p in outside.iterdir()) == ["a", "b", "c", "d"], "deleted through the link"
