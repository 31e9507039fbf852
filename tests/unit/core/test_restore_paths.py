"""A restore's fast paths give what the plain ones give: run entries decoded typed in one pass
(core/run_codec.py) against the body read as plain JSON data; roots registered in bulk
(`Roots`, `Nesting.add_all`) against one `add` each."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptlog.errors import SnapshotCorrupt
from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.core.delta import DELTA_ENVELOPE, Capture, decode_chain
from ckptlog.processor.core.lifecycle import Roots
from ckptlog.processor.core.nesting import Nesting
from ckptlog.processor.core.snapshot import (
    BASE_ENVELOPE,
    DELTA_FORMAT,
    FORMAT,
    SCHEMA_VERSION,
    _typed,
    canonical,
    decode,
    encode,
    of_fold,
    opened,
    parsed,
    snapshot_in,
)
from ckptlog.processor.core.state import RunState
from tests import factories as f

ROOT = "file:///d"


def busy_fold() -> Fold:
    """Runs with several checkpoints (out of score order), pending ones, evictions owed, a restart,
    an implicit run, a retention rule's state, a finished run: no NaN (the typed path reads it)."""
    fold = Fold(FoldSettings(default_root=ROOT, dedup_window=16), track_changes=True)
    lines = [
        f.started("r", f"{ROOT}/r", keep=3, attr="acc", validation={"fn_kwargs": {"k": [1, {"z": None}]}}),
        f.report("r", {"acc": 0.5, "nested": {"x": [1, 2]}}, f"{ROOT}/r/a", validation=True),
        f.report("r", {"acc": 0.9}, f"{ROOT}/r/b"),
        f.report("r", {"acc": 0.1}, f"{ROOT}/r/c/deep"),
        f.report("r", {"acc": 0.7}, f"{ROOT}/r/d"),
        f.restart("r"),
        f.report("r", {"loss": 3}, f"{ROOT}/r/e"),
        f.report("implicit", {"acc": 2}, f"{ROOT}/implicit/x"),
        f.started("done", f"{ROOT}/done", keep=1, attr="acc"),
        f.report("done", {"acc": 1}, f"{ROOT}/done/one"),
        f.finished("done"),
    ]
    for line in lines:
        assert fold.apply(f.event(line)).rejection is None, line
    return fold


def slow(data: bytes, version: int) -> Any:
    """The snapshot `data` holds, its body read as plain JSON data (the path of a reformatted one)."""
    return snapshot_in(parsed(data)["snapshot"], version)


def test_the_typed_path_reads_a_snapshot_and_gives_what_the_plain_one_gives() -> None:
    data = encode(of_fold(busy_fold(), "t", 0, 9))
    typed = _typed(data, BASE_ENVELOPE, "snapshot")
    assert typed is not None, "the snapshot as written takes the typed path"
    assert encode(decode(data)) == data == encode(slow(data, SCHEMA_VERSION))
    back, plain = decode(data), slow(data, SCHEMA_VERSION)
    for run_id, run in back.runs.items():
        assert _state(run) == _state(plain.runs[run_id]), run_id
    assert [r.path for r in back.runs["r"].checkpoints] == [r.path for r in plain.runs["r"].checkpoints]


def _state(run: RunState) -> tuple[Any, ...]:
    """What a restore rebuilds beside the entry's fields: sort keys, the nesting index, derived fields."""
    return (
        [(r.key, r.sort_key, r.status, r.validation, r.preserved) for r in run.checkpoints],
        run.nesting.below,
        run.nesting.start,
        run.rules,
        run.preserved_count,
        run.keep,
        run.score_attribute,
        run.latest.key if run.latest else None,
        list(run.pending),
        dict(run.outstanding),
        run.seen.data(),
        run.root_prefix,
    )


def test_a_checkpoint_list_written_out_of_order_is_sorted_again() -> None:
    fold = busy_fold()
    body = json.loads(encode(of_fold(fold, "t", 0, 9)))["snapshot"]
    body["runs"]["r"]["checkpoints"].reverse()
    back = decode(_sealed(body))
    assert [r.key for r in back.runs["r"].checkpoints] == [r.key for r in fold.runs["r"].checkpoints]


@pytest.mark.parametrize(
    "change",
    [
        lambda entry: entry.pop("reopened"),
        lambda entry: entry.pop("dedup"),
        lambda entry: entry.pop("config"),
        lambda entry: entry.update(config={**entry["config"], "num_to_keep": 0}),
        lambda entry: entry.update(checkpoints={}),
        lambda entry: entry["checkpoints"][0].update(validation={"timeout_s": -1}),
        lambda entry: entry.update(finished="maybe"),
        lambda entry: entry.update(reopened=True),
        lambda entry: entry.update(latest="file:///elsewhere"),
    ],
)
def test_a_run_entry_that_is_not_one_is_a_corrupt_snapshot(change: Any) -> None:
    body = json.loads(encode(of_fold(busy_fold(), "t", 0, 9)))["snapshot"]
    change(body["runs"]["r"])
    with pytest.raises(SnapshotCorrupt, match="content invalid"):
        decode(_sealed(body))


def _sealed(body: dict[str, Any], version: int = SCHEMA_VERSION) -> bytes:
    digest = hashlib.sha256(canonical(body)).hexdigest()
    return canonical({"checksum": f"sha256:{digest}", "format": FORMAT, "schema_version": version, "snapshot": body})


def test_a_chain_reads_its_deltas_typed_and_gives_the_state_of_the_moment() -> None:
    fold = busy_fold()
    base = _taken(Capture(fold, "t", 0, 5, None))
    for line in (f.report("r", {"acc": 0.95}, f"{ROOT}/r/f"), f.report("new", {"acc": 1}, f"{ROOT}/new/a")):
        assert fold.apply(f.event(line)).rejection is None
    delta = _taken(Capture(fold, "t", 0, 9, decode_chain([base]).chain))
    version, body = opened(delta, name="delta", form=DELTA_FORMAT, key="delta", typed=DELTA_ENVELOPE)
    assert version == SCHEMA_VERSION and not isinstance(next(iter(body["runs"]["put"].values())), dict)
    assert encode(decode_chain([base, delta])) == encode(of_fold(fold, "t", 0, 9))


def _taken(capture: Capture) -> bytes:
    while capture.step():
        pass
    return capture.encoded()


PATHS = st.lists(st.text(alphabet="ab/:.é", max_size=12), max_size=30)


@settings(max_examples=300, deadline=None)
@given(PATHS, st.integers(0, 4))
def test_paths_added_in_bulk_count_as_one_add_each(paths: list[str], start: int) -> None:
    """Hostile spellings included: no '/', a '/' first or at `start`, '//', a trailing '/', repeats."""
    one, bulk = Nesting(start), Nesting(start)
    for path in paths:
        one.add(path)
    bulk.add_all(paths)
    assert bulk.below == one.below
    for path in paths:  # and they unregister alike
        one.discard(path)
        bulk.discard(path)
    assert bulk.below == one.below == {}


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.text(alphabet="xy/", max_size=6))))
def test_roots_registered_in_bulk_are_those_added_one_by_one(runs: list[tuple[str, str]]) -> None:
    states = []
    for run_id, tail in runs:
        root = f"{ROOT}/{tail}" if tail else None
        state = RunState(
            run_id, FoldSettings().default_config, root, f"{root}/" if root else "\0", FoldSettings().default_validation
        )
        states.append(state)
    bulk, history = Roots(states), Roots(states, history=True)
    assert list(bulk.owners.items()) == list(history.owners.items())
    assert bulk.nesting.below == history.nesting.below
