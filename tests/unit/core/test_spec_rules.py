"""Fold rules added for deletion safety (contract §9) and crash consistency (contract §3, §7), each a
regression test of a case the review reproduced (issues 12 and 13)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from ckptlog.events.rejections import Reason
from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.core.snapshot import Snapshot, decode, encode
from tests import factories as f

ROOT = "file:///data/runs"


def apply(fold: Fold, raw: bytes) -> Any:
    return fold.apply(f.event(raw))


def reason(fold: Fold, raw: bytes) -> str | None:
    effects = apply(fold, raw)
    return None if effects.rejection is None else str(effects.rejection.reason)


# -- contract §9: what the fold refuses ---------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["memory://runs/r1/::memory", "memory://runs/r1/A::file", "memory://runs/r1/%2e%2e", "memory://runs/r1/A?x=1"],
)
def test_url_chaining_and_other_respellings_are_unsafe_paths(path: str) -> None:
    """Issue 12 case 1: evicting `…/::memory` once removed the whole run root through fsspec."""
    fold = Fold()
    assert reason(fold, f.started("r1", "memory://runs/r1", keep=2, attr="acc")) is None
    assert reason(fold, f.report("r1", {"acc": 0.9}, "memory://runs/r1/A")) is None
    assert reason(fold, f.report("r1", {"acc": 0.1}, path)) == "unsafe_path"
    assert [c.path for c in fold.runs["r1"].checkpoints] == ["memory://runs/r1/A"]


@pytest.mark.parametrize("order", [("x", "x/y"), ("x/y", "x"), ("x", "x/a/b"), ("x/a/b", "x")])
def test_nested_checkpoint_paths_are_refused_in_both_orders(order: tuple[str, str]) -> None:
    """Issue 12 case 3: keep 1, `x` then `x/y`: evicting x removed its tree, the kept x/y with it."""
    fold = Fold()
    apply(fold, f.started("r1", f"{ROOT}/r1", keep=1))
    first, second = order
    assert reason(fold, f.report("r1", {}, f"{ROOT}/r1/{first}")) is None
    assert reason(fold, f.report("r1", {}, f"{ROOT}/r1/{second}")) == "nested_checkpoint_path"


def test_an_evicted_path_nests_until_its_deletion_is_settled() -> None:
    fold = Fold()
    apply(fold, f.started("r1", f"{ROOT}/r1", keep=1))
    apply(fold, f.report("r1", {}, f"{ROOT}/r1/x"))
    effects = apply(fold, f.report("r1", {}, f"{ROOT}/r1/w"))  # evicts x
    assert [d.path for d in effects.deletions] == [f"{ROOT}/r1/x"]
    assert reason(fold, f.report("r1", {}, f"{ROOT}/r1/x/y")) == "nested_checkpoint_path"
    apply(fold, f.settled("r1", deleted=[(f"{ROOT}/r1/x", effects.deletions[0].eviction)]))
    assert reason(fold, f.report("r1", {}, f"{ROOT}/r1/x/y")) is None


@pytest.mark.parametrize("path", ["runs/r1/A", "file://runs/r1/B", "./runs/r1/C", "~/runs/r1/D"])
def test_relative_local_checkpoint_paths_are_refused(path: str) -> None:
    """Issue 12 case 7: they were accepted, and the Deleter then refused them forever."""
    fold = Fold(FoldSettings(default_root="file:///data/runs"))
    assert reason(fold, f.report("r1", {}, path)) in ("unsafe_path", "path_outside_root")
    assert "r1" not in fold.runs or not fold.runs["r1"].by_key


@pytest.mark.parametrize("root", ["/", "file:///", "s3://bucket", "s3://bucket/", "gs://b", "runs/r1", "file://x"])
def test_roots_that_are_a_filesystem_root_a_bucket_or_relative_are_refused(root: str) -> None:
    """Issue 12 case 8: any producer could declare `/` or `s3://bucket` and have anything under it deleted."""
    assert reason(Fold(), f.started("r1", root)) == "unsafe_storage_root"


@pytest.mark.parametrize("other", [f"{ROOT}/r1", f"{ROOT}/r1/sub", ROOT, f"{ROOT}/r1//"])
def test_a_root_nesting_another_runs_root_is_refused(other: str) -> None:
    fold = Fold()
    assert reason(fold, f.started("r1", f"{ROOT}/r1")) is None
    assert reason(fold, f.started("r2", other)) == "unsafe_storage_root"
    assert reason(fold, f.started("r3", f"{ROOT}/r1x")) is None  # a sibling sharing a name prefix


def test_a_reused_path_is_settled_per_eviction() -> None:
    """Issue 12 case 6: completion ids hashed the path set only, so a second deletion of a reused
    path was dropped as a duplicate and the path stayed outstanding forever."""
    fold = Fold()
    apply(fold, f.started("r1", f"{ROOT}/r1", keep=1))
    evictions = []
    for round_ in range(3):
        apply(fold, f.report("r1", {}, f"{ROOT}/r1/A"))
        effects = apply(fold, f.report("r1", {}, f"{ROOT}/r1/B{round_}"))  # evicts A
        (deletion,) = [d for d in effects.deletions if d.path.endswith("/A")]
        evictions.append(deletion.eviction)
        stale = f.settled("r1", deleted=[(f"{ROOT}/r1/A", deletion.eviction + 100)])
        assert not apply(fold, stale).outputs  # names another eviction: settles nothing
        assert f"{ROOT}/r1/A" in fold.runs["r1"].outstanding
        assert apply(fold, f.settled("r1", deleted=[(f"{ROOT}/r1/A", deletion.eviction)])).outputs
        assert f"{ROOT}/r1/A" not in fold.runs["r1"].outstanding
    assert len(set(evictions)) == 3


def test_a_refused_deletion_is_settled_with_a_warning() -> None:
    fold = Fold()
    apply(fold, f.started("r1", f"{ROOT}/r1", keep=1))
    apply(fold, f.report("r1", {}, f"{ROOT}/r1/A"))
    (deletion,) = apply(fold, f.report("r1", {}, f"{ROOT}/r1/B")).deletions
    effects = apply(fold, f.settled("r1", refused=[(deletion.path, deletion.eviction, "a symlink inside the path")]))
    (warning,) = effects.outputs
    assert warning.type == "warning" and warning.data["code"] == "deletion_refused"
    assert "a symlink inside the path" in warning.data["message"] and not fold.runs["r1"].outstanding


# -- contract §3: numbers, key order, generations, validation ---------------------------------


BIG = [10**400, -(10**400), 2**53 + 1, 2**53, float(2**53), 2**64 + 1, 2**64, float(2**64), 1e308, -(2**63) - 1]


@pytest.mark.parametrize("order", ["max", "min"])
def test_exact_numbers_keep_their_place_past_4096_kept_checkpoints(order: str) -> None:
    """Issue 13 case 2: past 4096 kept records scores lived in array('d'): an int beyond the
    float range raised OverflowError, one beyond 2**53 then VALIDATED raised "not in the kept list",
    and such ints sorted differently once the list was large."""
    rng = random.Random(7)
    fold = Fold()
    apply(fold, f.started("r", f"{ROOT}/r", attr="acc", order=order))
    scores: list[Any] = [rng.random() for _ in range(4200)]
    for i, value in enumerate(scores):
        assert reason(fold, f.report("r", {"acc": value}, f"{ROOT}/r/c{i}")) is None
    for j, value in enumerate(BIG):
        assert reason(fold, f.report("r", {"acc": value}, f"{ROOT}/r/big{j}", validation=True)) is None
    for j, value in enumerate(BIG[::2]):
        assert reason(fold, f.result("r", f"{ROOT}/r/big{2 * j}", "VALIDATED", {"acc": value + 1})) is None
    kept = list(fold.runs["r"].checkpoints)
    assert [r.sort_key for r in kept] == sorted(r.sort_key for r in kept)
    signed = [(r.sort_key[1] if order == "max" else -r.sort_key[1]) for r in kept]
    assert signed[-1] == (10**400 + 1 if order == "max" else -(10**400))


def test_a_restored_fold_ranks_ambiguous_metric_keys_as_a_clean_one() -> None:
    """Issue 13 case 4: snapshots sorted metric keys, and the flattened lookup of `a/b/c` in
    `{"a/b": {"c": 1}, "a": {"b/c": 2}}` depends on which key came first."""
    lines = [
        f.started("r", f"{ROOT}/r", keep=1, attr="a/b/c"),
        f.report("r", {"a/b": {"c": 1}, "a": {"b/c": 2}}, f"{ROOT}/r/c1"),
        f.report("r", {"a": {"b": {"c": 1.5}}}, f"{ROOT}/r/c2"),
    ]
    clean = Fold()
    for raw in lines:
        apply(clean, raw)
    first = Fold()
    for raw in lines[:2]:
        apply(first, raw)
    restored = decode(encode(Snapshot("t", 0, 2, first.settings, first.runs)))
    assert list(restored.runs["r"].by_key[f"{ROOT}/r/c1"].metrics) == ["a/b", "a"]  # the order they came in
    resumed = Fold(restored.settings, restored.runs)
    apply(resumed, lines[2])
    assert [c.path for c in resumed.runs["r"].checkpoints] == [c.path for c in clean.runs["r"].checkpoints]
    assert [c.path for c in clean.runs["r"].checkpoints] == [f"{ROOT}/r/c2"]  # c1 scored 1, evicted
    assert encode(Snapshot("t", 0, 3, resumed.settings, resumed.runs)) == encode(
        Snapshot("t", 0, 3, clean.settings, clean.runs)
    )


def test_a_newer_generation_moves_the_run_and_old_reports_are_stale() -> None:
    """Issue 13 case 6: a newer generation's report did not advance the run, so the old worker
    group's reports were still accepted afterwards."""
    fold = Fold()
    apply(fold, f.started("r", f"{ROOT}/r"))
    effects = apply(fold, f.report("r", {"loss": 1}, generation=2))
    started = [o for o in effects.outputs if o.type == "worker_group_started"]
    assert started and started[0].data["generation"] == 2 and started[0].data["num_workers"] is None
    assert (fold.runs["r"].generation, fold.runs["r"].index_in_generation) == (2, 1)
    assert reason(fold, f.report("r", {"loss": 1}, generation=1)) == "stale_generation"
    late = apply(fold, f.line("worker_group_restart", "r", {"num_workers": 4, "generation": 2}))
    assert [o.data["code"] for o in late.outputs] == ["restart_not_newer"] and fold.runs["r"].generation == 2
    apply(fold, f.restart("r"))
    assert fold.runs["r"].generation == 3


def test_validation_without_a_checkpoint_is_refused() -> None:
    """Issue 13 case 7: Ray's train.report raises here; ckptlog accepted it silently."""
    fold = Fold()
    apply(fold, f.started("r", f"{ROOT}/r"))
    before = encode(Snapshot("t", 0, 0, fold.settings, fold.runs))
    assert reason(fold, f.report("r", {"loss": 1}, validation=True)) == "validation_without_checkpoint"
    spec = {"fn_kwargs": {}, "timeout_s": None}
    assert reason(fold, f.report("r", {"loss": 1}, validation=spec)) == "validation_without_checkpoint"
    assert encode(Snapshot("t", 0, 0, fold.settings, fold.runs)) == before
    assert reason(fold, f.report("r", {"loss": 1})) is None  # without validation: fine
    assert Reason.VALIDATION_WITHOUT_CHECKPOINT == "validation_without_checkpoint"
