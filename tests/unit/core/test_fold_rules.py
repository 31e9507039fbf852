"""One test per rule of contract §3–4 (and the §8 rejections the fold decides)."""

from __future__ import annotations

import math
from typing import Any

from ckptlog.events import Reason
from ckptlog.events.decoded import CheckpointConfig
from ckptlog.processor.core import Effects, Fold, FoldSettings, run_view
from tests import factories as f

ROOT = "file:///data/r"


def play(*lines: bytes, settings: FoldSettings | None = None) -> tuple[Fold, list[Effects]]:
    fold = Fold(settings)
    return fold, [fold.apply(f.event(raw)) for raw in lines]


def kept(fold: Fold, run: str = "r") -> list[str]:
    return [c["path"].rsplit("/", 1)[-1] for c in run_view(fold.runs[run])["checkpoints"]]


def types(effects: Effects) -> list[str]:
    return [o.type for o in effects.outputs]


def ck(name: str) -> str:
    return f"{ROOT}/{name}"


def rep(name: str, score: Any = None, **kw: Any) -> bytes:
    return f.report(metrics={} if score is None else {"acc": score}, path=ck(name), **kw)


# -- sort order -------------------------------------------------------------------


def test_max_order_best_last() -> None:
    fold, _ = play(f.started(attr="acc"), rep("a", 0.5), rep("b", 0.9), rep("c", 0.1))
    assert kept(fold) == ["c", "a", "b"]
    assert run_view(fold.runs["r"])["best"] == ck("b")


def test_min_order_negates() -> None:
    fold, _ = play(f.started(attr="acc", order="min"), rep("a", 0.5), rep("b", 0.9), rep("c", 0.1))
    assert kept(fold) == ["b", "a", "c"]


def test_equal_scores_later_report_counts_as_better() -> None:
    fold, _ = play(f.started(attr="acc"), rep("a", 1), rep("b", 1), rep("c", 1))
    assert kept(fold) == ["a", "b", "c"]


def test_nested_metric_flattened_with_slash() -> None:
    fold, _ = play(
        f.started(attr="val/acc"),
        f.report(metrics={"val": {"acc": 2}}, path=ck("a")),
        f.report(metrics={"val": {"acc": 1}}, path=ck("b")),
    )
    assert kept(fold) == ["b", "a"]


def test_key_containing_slash_is_found_too() -> None:
    fold, _ = play(
        f.started(attr="val/acc"),
        f.report(metrics={"val/acc": 5}, path=ck("a")),
        f.report(metrics={"val": {"acc": 1}}, path=ck("b")),
    )
    assert kept(fold) == ["b", "a"]


def test_missing_nan_and_non_numeric_rank_worst_in_both_orders_with_warning() -> None:
    for order in ("max", "min"):
        fold, effects = play(
            f.started(attr="acc", order=order),
            rep("num", 100 if order == "min" else -100),
            rep("missing"),
            f.report(metrics={"acc": math.nan}, path=ck("nan")),
            f.report(metrics={"acc": "high"}, path=ck("str")),
            f.report(metrics={"acc": True}, path=ck("bool")),
        )
        assert kept(fold)[-1] == "num", order
        assert set(kept(fold)[:-1]) == {"missing", "nan", "str", "bool"}
        codes = [o.data["code"] for e in effects for o in e.outputs if o.type == "warning"]
        assert codes == ["score_missing", "score_nan", "score_not_numeric", "score_not_numeric"]


def test_a_pending_checkpoint_without_a_score_is_warned_only_if_its_result_brings_none() -> None:
    """Its score may come with the validation: warned once, when the result leaves it unscored."""
    fold, effects = play(
        f.started(attr="acc"),
        f.report(metrics={"loss": 1}, path=ck("a"), validation=True),
        f.report(metrics={"loss": 1}, path=ck("b"), validation=True),
        f.report(metrics={"loss": 1}, path=ck("c"), validation=True),
        f.result("r", ck("a"), "VALIDATED", {"acc": 0.5}),
        f.result("r", ck("b"), "VALIDATED", {"other": 1}),
        f.result("r", ck("c"), "VALIDATION_FAILED"),
    )
    warned = [
        (i, o.data["code"], o.data["checkpoint_path"])
        for i, e in enumerate(effects)
        for o in e.outputs
        if o.type == "warning"
    ]
    assert warned == [(5, "score_missing", ck("b")), (6, "score_missing", ck("c"))]
    assert kept(fold)[-1] == "a"


def test_infinities_are_real_scores() -> None:
    fold, _ = play(f.started(attr="acc"), rep("ninf", -math.inf), rep("missing"), rep("inf", math.inf))
    assert kept(fold) == ["missing", "ninf", "inf"]


def test_no_score_attribute_keeps_registration_order() -> None:
    fold, _ = play(f.started(), rep("a", 9), rep("b", 1), rep("c", 5))
    assert kept(fold) == ["a", "b", "c"]


# -- report -----------------------------------------------------------------------


def test_report_without_checkpoint_only_counts() -> None:
    fold, effects = play(f.started(), f.report(metrics={"loss": 1}), rep("a"))
    run = fold.runs["r"]
    assert run.report_count == 2 and run.index_in_generation == 2
    assert types(effects[1]) == ["watermark"]
    assert run_view(run)["checkpoints"][0]["report_index"] == 1


def test_registration_outputs_and_latest() -> None:
    fold, effects = play(f.started(keep=2), rep("a"), rep("b", validation=True))
    assert types(effects[1]) == ["checkpoint_registered", "watermark"]
    assert types(effects[2]) == ["checkpoint_registered", "validation_requested", "watermark"]
    assert run_view(fold.runs["r"])["latest"] == ck("b")


def test_validation_true_uses_the_runs_default_spec() -> None:
    _, effects = play(
        f.started(validation={"fn_kwargs": {"split": "val"}, "timeout_s": 30}),
        rep("a", validation=True),
        rep("b", validation={"fn_kwargs": {"k": 1}, "timeout_s": None}),
    )
    req = [o.data for e in effects for o in e.outputs if o.type == "validation_requested"]
    assert req[0]["fn_kwargs"] == {"split": "val"} and req[0]["timeout_s"] == 30
    assert req[1]["fn_kwargs"] == {"k": 1} and req[1]["timeout_s"] is None


# -- retention --------------------------------------------------------------------


def test_retention_evicts_worst_beyond_num_to_keep() -> None:
    fold, effects = play(f.started(keep=2, attr="acc"), rep("a", 3), rep("b", 1), rep("c", 2))
    assert kept(fold) == ["c", "a"]
    assert [d.path for d in effects[3].deletions] == [ck("b")]
    assert "checkpoint_evicted" in types(effects[3])


def test_latest_is_never_evicted() -> None:
    fold, _ = play(f.started(keep=1, attr="acc"), rep("a", 9), rep("b", 1))
    assert kept(fold) == ["b", "a"]  # b is worst but latest
    fold2, _ = play(f.started(keep=1, attr="acc"), rep("a", 9), rep("b", 1), rep("c", 0))
    assert kept(fold2) == ["c", "a"]  # b lost its exemption


def test_pending_is_never_evicted_and_is_evicted_after_result() -> None:
    fold, effects = play(
        f.started(keep=1, attr="acc"),
        rep("a", 1, validation=True),
        rep("b", 5),
        rep("c", 6),
        f.result("r", ck("a"), "VALIDATION_FAILED"),
    )
    assert [d.path for d in effects[4].deletions] == [ck("a")]
    assert kept(fold) == ["c"]


def test_keep_none_keeps_everything() -> None:
    fold, _ = play(f.started(attr="acc"), *[rep(f"c{i}", i) for i in range(20)])
    assert len(kept(fold)) == 20


def test_evicted_paths_become_outstanding_until_deletion_completed() -> None:
    fold, effects = play(f.started(keep=1), rep("a"), rep("b"), f.deleted("r", ck("a")), f.deleted("r", ck("a")))
    assert fold.runs["r"].outstanding == {}
    assert types(effects[3]) == ["checkpoints_deleted"]
    assert types(effects[4]) == []


def test_one_completion_event_confirms_several_paths() -> None:
    fold, effects = play(
        f.started(keep=1),
        rep("a"),
        rep("b"),
        rep("c"),
        f.deleted_many("r", [ck("a"), "file:///data/r/../x", ck("zz"), ck("b") + "/"]),
        f.deleted_many("r", [ck("b")]),
    )
    assert fold.runs["r"].outstanding == {}
    assert [o.data for o in effects[4].outputs] == [
        {"checkpoint_paths": [ck("a"), ck("b") + "/"]}
    ]  # '..', unknown: skipped
    assert types(effects[5]) == []  # b was already confirmed (same key): a retried completion is harmless


# -- validation results -----------------------------------------------------------


def test_validated_merges_metrics_and_resorts() -> None:
    fold, effects = play(
        f.started(attr="acc"),
        rep("a", 1, validation=True),
        rep("b", 5),
        f.result("r", ck("a"), "VALIDATED", {"acc": 9, "extra": 1}),
    )
    view = run_view(fold.runs["r"])
    assert kept(fold) == ["b", "a"]
    assert view["checkpoints"][1]["metrics"] == {"acc": 9, "extra": 1}
    assert view["checkpoints"][1]["status"] == "VALIDATED"
    assert types(effects[3]) == ["checkpoint_status_changed", "watermark"]


def test_failed_and_timeout_keep_metrics_and_position() -> None:
    for status in ("VALIDATION_FAILED", "VALIDATION_TIMEOUT"):
        fold, effects = play(
            f.started(attr="acc"),
            rep("a", 1, validation=True),
            rep("b", 5),
            f.result("r", ck("a"), status, {"acc": 99}, error="boom"),
        )
        view = run_view(fold.runs["r"])
        assert kept(fold) == ["a", "b"]
        assert view["checkpoints"][0]["metrics"] == {"acc": 1}
        assert view["checkpoints"][0]["status"] == status
        assert effects[3].outputs[0].data["error"] == "boom"


def test_result_for_non_pending_checkpoint_warns_and_changes_nothing() -> None:
    fold, effects = play(f.started(), rep("a"), f.result("r", ck("a")), f.result("nobody", ck("x")))
    assert types(effects[2]) == ["warning"] and effects[2].outputs[0].data["code"] == "not_pending"
    assert types(effects[3]) == ["warning"]
    assert run_view(fold.runs["r"])["checkpoints"][0]["status"] == "COMMITTED"
    assert "nobody" not in fold.runs


def test_second_result_for_same_checkpoint_is_a_warning() -> None:
    fold, effects = play(
        f.started(), rep("a", validation=True), f.result("r", ck("a")), f.result("r", ck("a"), "VALIDATION_FAILED")
    )
    assert types(effects[3]) == ["warning"]
    assert run_view(fold.runs["r"])["checkpoints"][0]["status"] == "VALIDATED"


# -- watermarks -------------------------------------------------------------------


def test_watermarks_committed_and_validated() -> None:
    fold, effects = play(f.started(), rep("a"), rep("b", validation=True), rep("c", validation=True), rep("d"))
    last = effects[-1].outputs[-1]
    assert last.type == "watermark"
    assert last.data == {"committed": 4, "validated": 1, "generation": 0, "index_in_generation": 4}
    fold.apply(f.event(f.result("r", ck("b"))))
    assert fold.runs["r"].validated == 2
    fold.apply(f.event(f.result("r", ck("c"), "VALIDATION_TIMEOUT")))
    assert fold.runs["r"].validated == 4


# -- restart and generations ------------------------------------------------------


def test_restart_bumps_generation_and_hands_out_latest() -> None:
    fold, effects = play(f.started(), rep("a"), rep("b", validation=True), f.restart(num_workers=4))
    started = effects[3].outputs[0]
    assert started.type == "worker_group_started"
    assert started.data == {"generation": 1, "report_count": 2, "latest_checkpoint_path": ck("b"), "num_workers": 4}
    run = fold.runs["r"]
    assert run.index_in_generation == 0 and run.report_count == 2
    assert ck("b") in {c.path for c in run.pending.values()}  # pending survives a restart


def test_restart_before_any_checkpoint_hands_out_none() -> None:
    _, effects = play(f.restart("fresh"))
    assert effects[0].outputs[0].data["latest_checkpoint_path"] is None


def test_stale_generation_is_rejected_and_state_untouched() -> None:
    fold, effects = play(f.started(), f.restart(), rep("a", generation=0), rep("b", generation=1))
    assert effects[2].rejection is not None and effects[2].rejection.reason == Reason.STALE_GENERATION
    assert kept(fold) == ["b"] and fold.runs["r"].report_count == 1


# -- dedup ------------------------------------------------------------------------


def test_duplicate_event_id_is_a_no_op() -> None:
    fold, effects = play(f.started(), rep("a", event_id="same"), rep("b", event_id="same"))
    assert effects[2].duplicate and not effects[2].outputs
    assert kept(fold) == ["a"]


def test_dedup_window_is_bounded() -> None:
    settings = FoldSettings(default_root=ROOT, dedup_window=3)
    fold, _ = play(*[f.report(event_id=f"id{i}") for i in range(10)], settings=settings)
    run = fold.runs["r"]
    assert run.seen.foreign_ids() == ["id7", "id8", "id9"] and run.seen.foreign_set == {"id7", "id8", "id9"}
    fold.apply(f.event(f.report(event_id="id0")))  # fell out of the window: applied again
    assert run.report_count == 11


def test_rejected_event_id_is_not_remembered() -> None:
    fold, effects = play(
        f.started(), f.report(path="file:///elsewhere/x", event_id="e"), f.report(path=ck("x"), event_id="e")
    )
    assert effects[1].rejection is not None
    assert kept(fold) == ["x"]


# -- paths ------------------------------------------------------------------------


def test_checkpoint_outside_root_rejected() -> None:
    for path in ("file:///data/other/c", "s3://data/r/c", ROOT, "file:///data"):
        _, effects = play(f.started(), f.report(path=path))
        assert effects[1].rejection is not None and effects[1].rejection.reason == Reason.PATH_OUTSIDE_ROOT, path


def test_dotdot_segments_rejected() -> None:
    _, effects = play(f.started(), f.report(path=ROOT + "/../escape"))
    assert effects[1].rejection is not None and effects[1].rejection.reason == Reason.UNSAFE_PATH


def test_equivalent_spellings_are_the_same_checkpoint() -> None:
    fold, effects = play(f.started(root="/data/r"), f.report(path="file:///data/r/a"), f.report(path="/data//r/a/"))
    assert effects[2].rejection is not None
    assert effects[2].rejection.reason == Reason.DUPLICATE_CHECKPOINT_PATH
    assert fold.runs["r"].report_count == 1


def test_duplicate_path_rejected_while_outstanding() -> None:
    _, effects = play(f.started(keep=1), rep("a"), rep("b"), rep("a"))
    assert effects[3].rejection is not None
    assert effects[3].rejection.reason == Reason.DUPLICATE_CHECKPOINT_PATH


def test_storage_path_outside_outer_root_rejected() -> None:
    settings = FoldSettings(default_root="file:///data", outer_root="file:///data")
    _, effects = play(f.started(root="file:///etc/r"), settings=settings)
    assert effects[0].rejection is not None and effects[0].rejection.reason == Reason.PATH_OUTSIDE_ROOT
    _, ok = play(f.started(root="file:///data/r"), settings=settings)
    assert ok[0].rejection is None


# -- run_started and processor defaults -------------------------------------------


def test_identical_run_started_is_a_no_op_different_is_rejected() -> None:
    fold, effects = play(f.started(keep=2), rep("a"), f.started(keep=2), f.started(keep=3))
    assert not effects[2].outputs and effects[2].rejection is None
    assert effects[3].rejection is not None and effects[3].rejection.reason == Reason.RUN_STARTED_CONFLICT
    assert fold.runs["r"].config.num_to_keep == 2


def test_report_before_run_started_uses_processor_defaults() -> None:
    settings = FoldSettings(
        default_config=CheckpointConfig(num_to_keep=1, checkpoint_score_attribute="acc"), default_root="file:///data"
    )
    fold, _ = play(rep("a", 5), rep("b", 1), rep("c", 2), settings=settings)
    assert kept(fold) == ["c", "a"]  # b evicted; c exempt as latest
    assert fold.runs["r"].storage_root == ROOT  # a root of its own: {--storage-root}/{run id}


def test_report_without_any_root_is_rejected_with_a_hint() -> None:
    _, effects = play(rep("a"))
    assert effects[0].rejection is not None and effects[0].rejection.reason == Reason.NO_STORAGE_ROOT
    assert "--storage-root" in effects[0].rejection.message


def test_run_started_after_metric_only_reports_is_adopted() -> None:
    fold, effects = play(f.report(), f.started(keep=3), rep("a"))
    assert effects[1].rejection is None
    run = fold.runs["r"]
    assert run.config.num_to_keep == 3 and run.report_count == 2


def test_run_started_after_checkpoints_under_defaults_conflicts() -> None:
    settings = FoldSettings(default_root="file:///data")
    _, effects = play(rep("a"), f.started(keep=3), settings=settings)
    assert effects[1].rejection is not None and effects[1].rejection.reason == Reason.RUN_STARTED_CONFLICT


def test_runs_are_independent() -> None:
    fold, _ = play(
        f.started("x", root="file:///d/x", keep=1),
        f.started("y", root="file:///d/y"),
        f.report("x", path="file:///d/x/1"),
        f.report("y", path="file:///d/y/1"),
        f.report("x", path="file:///d/x/2"),
        f.report("y", path="file:///d/y/2"),
    )
    assert len(fold.runs["x"].by_key) == 1 and len(fold.runs["y"].by_key) == 2


def test_doubled_slash_below_the_root_is_the_same_checkpoint() -> None:
    _, effects = play(f.started(), f.report(path=ck("a")), f.report(path=ROOT + "//a"))
    assert effects[2].rejection is not None
    assert effects[2].rejection.reason == Reason.DUPLICATE_CHECKPOINT_PATH
