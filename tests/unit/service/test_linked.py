"""A partition task on a real directory tree (contract §9 *Roots behind a symlink*): the batch that
registers a root reached through a symlink below --storage-root commits the fact and its
run_started's dead letter; the fact, read back, refuses the run; a replay rebuilds the same state
from the log whatever the storage holds by then, and never looks at what was committed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ckptlog.events.dead_letters import H_OFFSET, H_REASON, H_STAGE
from ckptlog.kafka.records import OutRecord
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.lifecycle import deletion_problem
from ckptlog.processor.core.snapshot import encode, of_fold
from ckptlog.processor.core.state import FoldSettings
from tests import factories as f
from tests.unit.service.test_batch import Rec, records
from tests.unit.service.test_partition import Publisher, idle, make_task


@pytest.fixture
def bound(tmp_path: Path) -> Path:
    (tmp_path / "bound/real").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "bound/l").symlink_to(tmp_path / "outside", target_is_directory=True)
    return tmp_path / "bound"


def fold_for(bound: Path | None) -> Fold:
    root = None if bound is None else str(bound)
    return Fold(FoldSettings(default_root=root, outer_root=root))


def log(bound: Path) -> list[bytes]:
    """r starts behind the link and reports twice at once (keep 1: an eviction); s is clean."""
    return [
        f.started("r", f"file://{bound}/l/r", keep=1, event_id="start-r"),
        f.report("r", {}, f"file://{bound}/l/r/c1", event_id="r1"),
        f.report("r", {}, f"file://{bound}/l/r/c2", event_id="r2"),
        f.started("s", f"file://{bound}/real/s", keep=1, event_id="start-s"),
        f.report("s", {}, f"file://{bound}/real/s/c1", event_id="s1"),
    ]


def committed(publisher: Publisher) -> list[OutRecord]:
    return [record for out, _ in publisher.commits for record in out]


def kinds(out: list[OutRecord], topic: str) -> list[tuple[bytes | None, str]]:
    return [(o.key, json.loads(o.value)["type"]) for o in out if o.topic == topic and o.value is not None]


async def test_the_batch_commits_the_fact_and_the_run_starteds_dead_letter(bound: Path) -> None:
    lines = log(bound)
    task, publisher, deleter, _ = make_task(bound.parent / "t", fold=fold_for(bound))
    await task.process(records(lines))
    await idle(task)
    out = committed(publisher)
    (fact,) = [o for o in out if o.topic == "in"]
    assert (fact.key, fact.partition) == (b"r", 0)
    body = json.loads(fact.value or b"")
    assert body["type"] == "ckptlog.root_refused.v1" and body["source"] == "ckptlog/processor"
    assert body["data"] == {
        "storage_path": f"file://{bound}/l/r",
        "reason": f"file://{bound}/l is a symlink (to {str(bound.parent / 'outside')!r})",
    }
    (letter,) = [o for o in out if o.topic == "d"]
    headers = dict(letter.headers)
    assert letter.value == lines[0] and letter.key == b"r"
    assert (headers[H_REASON], headers[H_STAGE], headers[H_OFFSET]) == (b"root_behind_symlink", b"storage", b"0")
    assert ("file://" + str(bound) + "/l/r", "r") in deleter.claimed  # claimed all the same: the walk refuses it
    assert task.fold.runs["r"].report_count == 2  # the fold has not read the fact yet: the window

    # the fact, read back from the input partition, refuses the run; later events are dead-lettered
    await task.process([Rec(5, fact.value, b"r"), *records([f.report("r", {}, f"file://{bound}/l/r/c3")], 6)])
    await idle(task)
    assert "r" not in task.fold.runs and task.fold.symlinked == {"r": f"file://{bound}/l/r"}
    out = publisher.commits[-1][0]
    assert [(o.key, o.value) for o in out if o.topic == "s"] == [(b"r", None)]  # its VIEW tombstoned
    codes = [json.loads(o.value or b"")["data"]["code"] for o in out if o.topic == "c"]
    assert codes == ["deletion_refused", "root_behind_symlink"]
    assert [dict(o.headers)[H_REASON] for o in out if o.topic == "d"] == [b"root_behind_symlink"]
    assert not [o for o in out if o.topic == "in"]  # nothing registered, nothing looked at
    await task.close(graceful=True)


async def test_clean_roots_no_bound_and_replays_below_the_committed_offset_are_not_looked_at(bound: Path) -> None:
    lines = log(bound)
    clean = [lines[3], lines[4]]
    task, publisher, _, _ = make_task(bound.parent / "a", fold=fold_for(bound))
    await task.process(records(clean))
    await idle(task)
    assert not [o for o in committed(publisher) if o.topic in ("in", "d")]
    task, publisher, _, _ = make_task(bound.parent / "b", fold=fold_for(None))  # no --storage-root
    await task.process(records(lines))
    await idle(task)
    assert not [o for o in committed(publisher) if o.topic in ("in", "d")] and "r" in task.fold.runs
    task, publisher, _, _ = make_task(bound.parent / "c", fold=fold_for(bound), publish_from=len(lines))
    await task.process(records(lines))  # an earlier owner folded and committed these: its facts are in the log
    await idle(task)
    assert not [o for o in committed(publisher) if o.topic in ("in", "d")] and "r" in task.fold.runs


async def test_an_implicit_runs_root_behind_a_link_gets_the_fact_and_no_dead_letter(bound: Path) -> None:
    task, publisher, _, _ = make_task(bound.parent / "t", fold=fold_for(bound))
    await task.process(records([f.report("l", {}, f"file://{bound}/l/c1")]))  # root {--storage-root}/l: the link
    await idle(task)
    out = committed(publisher)
    assert kinds(out, "in") == [(b"l", "ckptlog.root_refused.v1")] and not [o for o in out if o.topic == "d"]


@pytest.mark.parametrize("publish_from", [0, 3, 6])
async def test_a_replay_after_the_link_was_removed_rebuilds_the_same_state(bound: Path, publish_from: int) -> None:
    """The original run wrote the fact; the link is then replaced by a real directory. A replay from
    the log's start (publishing from the committed offset `publish_from`; 0: none) folds the fact and
    refuses the run as the original did, writes no new fact and deletes nothing of it."""
    lines = log(bound)
    first, publisher, _, _ = make_task(bound.parent / "first", fold=fold_for(bound))
    await first.process(records(lines))
    await idle(first)
    (fact,) = [o.value for o in committed(publisher) if o.topic == "in"]
    assert fact is not None
    logged = [*lines, fact]
    await first.process(records([fact], len(lines)))
    await idle(first)
    (bound / "l").unlink()
    shutil.copytree(bound.parent / "outside", bound / "l")  # whatever it held, now a real directory
    again, publisher, deleter, _ = make_task(bound.parent / "again", fold=fold_for(bound), publish_from=publish_from)
    await again.process(records(logged))
    await idle(again)
    assert encode(of_fold(again.fold, "t", 0, 0)) == encode(of_fold(first.fold, "t", 0, 0))
    assert again.fold.symlinked == {"r": f"file://{bound}/l/r"}
    assert not [o for o in committed(publisher) if o.topic == "in"]  # no new look found a link: no new fact
    for run, path, _ in deleter.submitted:  # a republished eviction of r: the deleter's re-check drops it
        assert (
            run != "r" or deletion_problem(again.fold.runs.get(run), path) == "the run is not in this partition's state"
        )
    assert again.fold.owed() == first.fold.owed() and not [d for d in again.fold.owed() if d.run_id == "r"]


@pytest.mark.parametrize(
    "spelling",
    ["file://{b}//l/./r/", "local://{b}/l/r", "{b}/l/r", "{b}/l/r//", "file://{b}/real/../l/r", "file://{b}/l%2Fr"],
)
async def test_hostile_spellings_of_a_root_behind_the_link(bound: Path, spelling: str) -> None:
    """A spelling the fold canonicalises is looked at as its canonical root; one it refuses (`..`, an
    escape) is never registered, so never looked at: its run_started is dead-lettered by the fold."""
    raw = f.started("r", spelling.format(b=bound), event_id="start-r")
    task, publisher, _, _ = make_task(bound.parent / "t", fold=fold_for(bound))
    await task.process(records([raw]))
    await idle(task)
    out = committed(publisher)
    letters = [dict(o.headers) for o in out if o.topic == "d"]
    if ".." in spelling or "%" in spelling:
        assert [(h[H_REASON], h[H_STAGE]) for h in letters] == [(b"unsafe_storage_root", b"fold")]
        assert not [o for o in out if o.topic == "in"]
        return
    (fact,) = [json.loads(o.value or b"") for o in out if o.topic == "in"]
    assert fact["data"]["storage_path"] == f"file://{bound}/l/r"
    assert [(h[H_REASON], h[H_STAGE]) for h in letters] == [(b"root_behind_symlink", b"storage")]
