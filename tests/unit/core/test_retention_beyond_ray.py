"""Retention beyond Ray (contract §3): keep_every_n_steps (Orbax's keep_period) and
keep_time_interval_s (Orbax's keep_time_interval) preserve checkpoints for good."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlog.processor.core import Fold, run_view
from ckptlog.processor.core.snapshot import Snapshot, decode, encode
from tests import factories as f

ROOT = "file:///data/runs"
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def started(run: str = "r", **config: Any) -> bytes:
    body = json.loads(f.started(run, f"{ROOT}/{run}", keep=config.pop("keep", None), attr=config.pop("attr", None)))
    body["data"]["checkpoint_config"].update(config)
    return json.dumps(body).encode()


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def fold(lines: list[bytes]) -> tuple[Fold, list[Any]]:
    folded, effects = Fold(), []
    for raw in lines:
        effects.append(folded.apply(f.event(raw)))
        assert effects[-1].rejection is None, effects[-1].rejection
    return folded, effects


def preserved(folded: Fold, run: str = "r") -> dict[str, str]:
    return {
        c["path"].rsplit("/", 1)[1]: c["preserved"]
        for c in run_view(folded.runs[run])["checkpoints"]
        if "preserved" in c
    }


def test_every_nth_report_is_preserved_and_exempt_from_num_to_keep() -> None:
    lines = [started(keep=1, keep_every_n_steps=3)] + [f.report("r", {}, f"{ROOT}/r/c{i}") for i in range(10)]
    folded, effects = fold(lines)
    assert preserved(folded) == {"c2": "steps", "c5": "steps", "c8": "steps"}  # steps 3, 6, 9 (1-based)
    kept = [c["path"].rsplit("/", 1)[1] for c in run_view(folded.runs["r"])["checkpoints"]]
    assert sorted(kept) == ["c2", "c5", "c8", "c9"]  # the preserved ones, plus one: num_to_keep=1
    evicted = {d.path.rsplit("/", 1)[1] for e in effects for d in e.deletions}
    assert evicted == {"c0", "c1", "c3", "c4", "c6", "c7"}


def test_the_step_comes_from_a_metric_when_one_is_named() -> None:
    steps: list[Any] = [1000, 1500, 2000.0, 2500.5, True, "3000", None, 3000]
    lines = [started(keep=1, keep_every_n_steps=1000, step_attribute="train/step")]
    for i, step in enumerate(steps):
        metrics = {} if step is None else {"train": {"step": step}}
        lines.append(f.report("r", metrics, f"{ROOT}/r/c{i}"))
    folded, effects = fold(lines)
    assert preserved(folded) == {"c0": "steps", "c2": "steps", "c7": "steps"}
    codes = [o.data["code"] for e in effects for o in e.outputs if o.type == "warning"]
    assert codes == ["step_not_integral", "step_not_integral", "step_not_integral", "step_missing"]


def test_one_checkpoint_per_interval_is_preserved_by_its_report_time() -> None:
    times: list[float | None] = [0, 1800, 3600, None, 7000, 7200, 7300]
    lines = [started(keep=1, keep_time_interval_s=3600)]
    for i, seconds in enumerate(times):
        extra = {} if seconds is None else {"time": at(seconds)}
        lines.append(f.report("r", {}, f"{ROOT}/r/c{i}", **extra))
    folded, _ = fold(lines)
    assert preserved(folded) == {"c0": "time", "c2": "time", "c5": "time"}
    assert folded.runs["r"].rule_state["preserved_at"] == (T0 + timedelta(seconds=7200)).timestamp()


def test_a_time_without_offset_counts_as_utc() -> None:
    lines = [started(keep=1, keep_time_interval_s=60)]
    lines += [f.report("r", {}, f"{ROOT}/r/c0", time="2026-11-30T12:00:00")]
    lines += [f.report("r", {}, f"{ROOT}/r/c1", time="2026-11-30T12:00:30Z")]
    lines += [f.report("r", {}, f"{ROOT}/r/c2", time="2026-11-30T13:01:00+01:00")]  # 12:01 UTC
    folded, _ = fold(lines)
    assert preserved(folded) == {"c0": "time", "c2": "time"}


def test_both_rules_label_steps_and_the_time_rule_still_counts_it() -> None:
    lines = [started(keep=1, keep_every_n_steps=2, keep_time_interval_s=100)]
    for i, seconds in enumerate([0, 50, 150, 160, 260]):
        lines.append(f.report("r", {}, f"{ROOT}/r/c{i}", time=at(seconds)))
    folded, _ = fold(lines)
    # c0: time (first timed); c1: steps (step 2) and time? 50-0 < 100: steps only; c2: time (150);
    # c3: steps (step 4) and 160-150 < 100; c4: 260-150 >= 100: time
    assert preserved(folded) == {"c0": "time", "c1": "steps", "c2": "time", "c3": "steps", "c4": "time"}
    lines = [started(keep=1, keep_every_n_steps=1, keep_time_interval_s=100)]
    lines += [f.report("r", {}, f"{ROOT}/r/c{i}", time=at(s)) for i, s in enumerate([0, 120])]
    folded, _ = fold(lines)
    assert preserved(folded) == {"c0": "steps", "c1": "steps"}
    assert folded.runs["r"].rule_state["preserved_at"] == (T0 + timedelta(seconds=120)).timestamp()  # it looked at both


def test_without_the_options_nothing_is_preserved_and_no_key_appears() -> None:
    folded, _ = fold([started(keep=1)] + [f.report("r", {}, f"{ROOT}/r/c{i}") for i in range(5)])
    assert preserved(folded) == {} and folded.runs["r"].preserved_count == 0


@st.composite
def logs(draw: st.DrawFn) -> list[bytes]:
    config: dict[str, Any] = {"keep": draw(st.sampled_from([1, 2, None])), "attr": draw(st.sampled_from([None, "acc"]))}
    if draw(st.booleans()):
        config["keep_every_n_steps"] = draw(st.integers(1, 4))
        if draw(st.booleans()):
            config["step_attribute"] = "step"
    if draw(st.booleans()):
        config["keep_time_interval_s"] = draw(st.sampled_from([1, 30, 100]))
    lines, clock = [started(**config)], 0.0
    for i in range(draw(st.integers(0, 30))):
        clock += draw(st.sampled_from([0, 10, 40, 150]))
        metrics = {"acc": draw(st.floats(0, 1)), "step": draw(st.sampled_from([i, i * 2, 1.5, "x"]))}
        extra = {"time": at(clock)} if draw(st.booleans()) else {}
        validation = draw(st.booleans())
        lines.append(f.report("r", metrics, f"{ROOT}/r/c{i}", validation=validation, event_id=f"e{i}", **extra))
        if validation and draw(st.booleans()):
            lines.append(f.result("r", f"{ROOT}/r/c{i}", "VALIDATED", {"acc": draw(st.floats(0, 1))}))
    return lines


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(logs(), st.data())
def test_preserved_is_never_evicted_and_a_restore_continues_alike(lines: list[bytes], data: st.DataObject) -> None:
    whole, effects = Fold(), []
    for raw in lines:
        effects.append(whole.apply(f.event(raw)))
    ever_preserved = {r.path for r in whole.runs["r"].checkpoints if r.preserved}
    evicted = {d.path for e in effects for d in e.deletions}
    assert not ever_preserved & evicted
    run = whole.runs["r"]
    if run.keep is not None:
        counted = [r for r in run.checkpoints if not r.preserved and r is not run.latest and r.key not in run.pending]
        assert len(counted) <= run.keep
    cut = data.draw(st.integers(0, len(lines)))
    first = Fold()
    for raw in lines[:cut]:
        first.apply(f.event(raw))
    restored = decode(encode(Snapshot("t", 0, cut, first.settings, first.runs)))
    resumed = Fold(restored.settings, restored.runs)
    for raw in lines[cut:]:
        resumed.apply(f.event(raw))
    assert encode(Snapshot("t", 0, 0, resumed.settings, resumed.runs)) == encode(
        Snapshot("t", 0, 0, whole.settings, whole.runs)
    )
