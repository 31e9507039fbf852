"""Decisions carry their reasons (contract §5, issue 22 item 1): every `checkpoint_evicted` says
which rule evicted it, its rank and the scores it was compared by; a preserved checkpoint's
`checkpoint_registered` says which rule preserved it."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ckptlog.processor.core import Fold
from ckptlog.processor.core.state import RunState
from tests import factories as f
from tests.unit.core import published
from tests.unit.core.test_fold_properties import PROFILE, ROOT, SETTINGS, logs
from tests.unit.core.test_retention_beyond_ray import ROOT as RUNS
from tests.unit.core.test_retention_beyond_ray import at, started

NOT_EXEMPT = ["not_latest", "not_pending", "not_preserved"]


def reasons(lines: list[bytes]) -> dict[str, dict[str, Any]]:
    """Fold `lines` (outputs checked against their schemas); checkpoint name -> its eviction reason."""
    fold, found = Fold(SETTINGS), {}
    for raw in lines:
        effects = fold.apply(f.event(raw))
        assert effects.rejection is None, effects.rejection
        published.check(effects.outputs)
        for out in effects.outputs:
            if out.type == "checkpoint_evicted":
                found[out.data["checkpoint_path"].rsplit("/", 1)[1]] = out.data["reason"]
    return found


def scored(
    run: str, scores: list[float], attr: str | None = "acc", order: str = "max", keep: int | None = 2
) -> list[bytes]:
    lines = [f.started(run, f"{ROOT}/{run}", keep=keep, attr=attr, order=order)]
    return lines + [f.report(run, {"acc": s}, f"{ROOT}/{run}/c{i}") for i, s in enumerate(scores)]


def test_num_to_keep_by_score_gives_rank_and_both_scores() -> None:
    reason = reasons(scored("a", [3, 1, 2]))["c1"]
    assert reason == {
        "rule": "num_to_keep",
        "order": "score",
        "rank": 3,
        "num_to_keep": 2,
        "score": 1,
        "worst_kept_score": 2,
        "not_exempt": NOT_EXEMPT,
    }


def test_under_min_the_scores_are_as_reported_not_signed() -> None:
    reason = reasons(scored("a", [1, 3, 2], order="min"))["c1"]
    assert (reason["rank"], reason["score"], reason["worst_kept_score"]) == (3, 3, 2)


def test_without_a_score_attribute_eviction_is_by_report_order() -> None:
    reason = reasons(scored("a", [5, 9], attr=None, keep=1))["c0"]
    assert (reason["order"], reason["rank"], reason["num_to_keep"]) == ("report", 2, 1)
    assert reason["score"] is None and reason["worst_kept_score"] is None


def test_a_missing_score_is_null_and_ranks_last() -> None:
    lines = [*scored("a", [3, 2], keep=1), f.report("a", {}, f"{ROOT}/a/c2"), f.report("a", {"acc": 1}, f"{ROOT}/a/c3")]
    found = reasons(lines)
    assert found["c1"]["score"] == 2 and found["c1"]["worst_kept_score"] == 3
    assert found["c2"]["score"] is None and found["c2"]["rank"] == 3  # the latest c3 still counts


def test_an_exempt_latest_below_the_kept_ones_does_not_change_the_worst_kept_score() -> None:
    found = reasons(scored("a", [5, 1, 3], keep=1))
    assert set(found) == {"c1"}  # c1 survived while it was the latest
    assert (found["c1"]["rank"], found["c1"]["score"], found["c1"]["worst_kept_score"]) == (3, 1, 5)


def test_a_finished_runs_best_rule_keeps_one() -> None:
    found = reasons([*scored("a", [1, 3, 2], keep=None), f.finished("a", keep="best")])
    assert set(found) == {"c0"}  # c2 is the latest: exempt
    assert found["c0"] == {
        "rule": "best",
        "order": "score",
        "rank": 3,
        "num_to_keep": 1,
        "score": 1,
        "worst_kept_score": 3,
        "not_exempt": NOT_EXEMPT,
    }


def test_a_preserved_checkpoint_is_registered_with_its_rule() -> None:
    lines = [started(keep=1, keep_every_n_steps=2)] + [f.report("r", {}, f"{RUNS}/r/c{i}") for i in range(3)]
    lines += [started("t", keep=1, keep_time_interval_s=60), f.report("t", {}, f"{RUNS}/t/c0", time=at(0))]
    fold, registered = Fold(), {}
    for raw in lines:
        effects = fold.apply(f.event(raw))
        published.check(effects.outputs)
        for out in effects.outputs:
            if out.type == "checkpoint_registered":
                registered[out.data["checkpoint_path"].removeprefix(f"{RUNS}/")] = out.data.get("preserved")
    assert registered == {"r/c0": None, "r/c1": "steps", "r/c2": None, "t/c0": "time"}


@st.composite
def finishing_logs(draw: Any) -> list[bytes]:
    """The property tests' logs, each run perhaps finished at the end (`kept` or `best`)."""
    lines: list[bytes] = draw(logs())
    for run in ("a", "b"):  # perhaps every 3rd report preserved (before logs' run_started: this one wins)
        if draw(st.booleans()):
            attr = draw(st.sampled_from([None, "acc"]))
            lines.insert(0, _preserving(run, draw(st.integers(1, 3)), attr))
    for run in ("a", "b"):
        keep = draw(st.sampled_from([None, "kept", "best"]))
        if keep is not None:
            lines.append(f.finished(run, keep=keep, event_id=f"finish-{run}"))
    return lines


def _preserving(run: str, keep: int, attr: str | None) -> bytes:
    body = json.loads(f.started(run, f"{ROOT}/{run}", keep=keep, attr=attr))
    body["data"]["checkpoint_config"]["keep_every_n_steps"] = 3
    return json.dumps(body).encode()


def _sort_key(run: RunState, report_index: int, score: float | None) -> tuple[bool, float, int]:
    if score is None:
        return False, -float("inf"), report_index
    return True, score if run.config.checkpoint_score_order == "max" else -score, report_index


@PROFILE
@given(finishing_logs())
def test_every_reason_agrees_with_the_folds_ordering(lines: list[bytes]) -> None:
    """Rank and scores of each eviction against the run's state right after it: the checkpoints
    that count and rank above it are those still kept above it plus those evicted with it above it."""
    fold = Fold(SETTINGS)
    for raw in lines:
        effects = fold.apply(f.event(raw))
        evictions = [o.data for o in effects.outputs if o.type == "checkpoint_evicted"]
        if not evictions:
            continue
        published.check(effects.outputs)
        run = fold.runs[f.event(raw).subject]  # it owes these deletions: still in the hot state
        kept = [r.sort_key for r in run.checkpoints if r.preserved is None]
        best = run.checkpoints.last()
        if evictions[0]["reason"]["rule"] == "best" and best is not None and best.preserved is not None:
            kept.append(best.sort_key)  # a preserved best is what `best` keeps, ranked 1st (contract §5)
        keys = [_sort_key(run, e["report_index"], e["reason"]["score"]) for e in evictions]
        for data, key in zip(evictions, keys, strict=True):
            reason = data["reason"]
            assert reason["order"] == ("report" if run.score_attribute is None else "score")
            assert reason["rank"] > reason["num_to_keep"] >= 1
            above = sum(k > key for k in kept) + sum(k > key for k in keys)
            assert reason["rank"] == above + 1
            worst = reason["worst_kept_score"]
            if run.score_attribute is None:
                assert reason["score"] is None and worst is None
            elif reason["score"] is not None:  # a scored checkpoint ranks above every unscored one
                assert worst is not None and _sort_key(run, 0, reason["score"])[1] <= _sort_key(run, 0, worst)[1]
            if worst is not None:
                assert any(k[0] and k[1] == _sort_key(run, 0, worst)[1] and k > key for k in kept)


def test_finishing_best_with_a_preserved_best_keeps_no_second_best() -> None:
    """Issue 42 item 6 (contract §3: `keep: "best"` keeps the best, the latest, pending and preserved
    ones): c3 is preserved (keep_every_n_steps 4) and scores best; c1 (0.8) is the best that is
    not preserved. Finishing with `best` evicts c1 too, ranked 2nd below c3; only c3 and the
    latest c5 stay."""
    lines = [started(keep=3, attr="acc", keep_every_n_steps=4)]
    lines += [f.report("r", {"acc": s}, f"{RUNS}/r/c{i}") for i, s in enumerate([0.1, 0.8, 0.2, 0.9, 0.3, 0.05])]
    fold = Fold()
    for raw in lines:
        fold.apply(f.event(raw))
    assert [r.preserved for r in fold.runs["r"].checkpoints][-1] == "steps"  # c3, the best
    effects = fold.apply(f.event(f.finished("r", keep="best")))
    published.check(effects.outputs)
    reasons = {
        o.data["checkpoint_path"].rsplit("/", 1)[1]: o.data["reason"]
        for o in effects.outputs
        if o.type == "checkpoint_evicted"
    }
    assert {name: (r["rank"], r["worst_kept_score"]) for name, r in reasons.items()} == {
        "c1": (2, 0.9),
        "c4": (3, 0.9),
        "c2": (4, 0.9),
    }
    assert all(r["rule"] == "best" and r["num_to_keep"] == 1 for r in reasons.values())
    assert sorted(r.path.rsplit("/", 1)[1] for r in fold.runs["r"].checkpoints) == ["c3", "c5"]
    assert sorted(d.path.rsplit("/", 1)[1] for d in effects.deletions) == ["c1", "c2", "c4"]


def test_finishing_best_with_a_best_not_preserved_keeps_it_and_the_preserved_ones() -> None:
    lines = [started(keep=3, attr="acc", keep_every_n_steps=4)]
    lines += [f.report("r", {"acc": s}, f"{RUNS}/r/c{i}") for i, s in enumerate([0.1, 0.95, 0.2, 0.9, 0.3, 0.05])]
    fold = Fold()
    for raw in lines:
        fold.apply(f.event(raw))
    effects = fold.apply(f.event(f.finished("r", keep="best")))
    reasons = {
        o.data["checkpoint_path"].rsplit("/", 1)[1]: o.data["reason"]["rank"]
        for o in effects.outputs
        if o.type == "checkpoint_evicted"
    }
    assert reasons == {"c4": 2, "c2": 3}  # c1 (0.95) is the best; c3 (preserved) and c5 (latest) stay
    assert sorted(r.path.rsplit("/", 1)[1] for r in fold.runs["r"].checkpoints) == ["c1", "c3", "c5"]
