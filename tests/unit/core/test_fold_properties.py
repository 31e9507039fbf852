"""Hypothesis properties of the fold (contract §3–4, §6)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlog.events.view import RunView
from ckptlog.processor.core import Fold, FoldSettings, run_view
from ckptlog.processor.core.snapshot import Snapshot, canonical, decode, encode
from tests import factories as f
from tests.unit.core import published

ROOT = "file:///data"
SCORES = st.one_of(
    st.floats(-5, 5, allow_nan=False), st.integers(-5, 5), st.just(math.nan), st.just("x"), st.none(), st.just(math.inf)
)


def event_id(draw: Any, run: str, counter: int) -> str:
    """A new id for the `counter`-th event, of run `run`: foreign, or structured (contract §3
    "Deduplication") for its run in order, far ahead, for another producer, or for another run."""
    return draw(
        st.sampled_from(
            [
                f"e{counter}",
                f"ck1:r:0:{counter}:{run}",
                f"ck1:r:0:{counter}:{run}",
                f"ck1:a:job:1:{10**17 + counter}:{run}",
                f"ck1:g:{counter}:{run}",
                f"ck1:r:0:{counter}:other",
            ]
        )
    )


@st.composite
def logs(draw: Any, runs: tuple[str, ...] = ("a", "b")) -> list[bytes]:
    """A random but well-formed log over a few runs, with duplicates and stray results."""
    out: list[bytes] = []
    for run in runs:
        if draw(st.booleans()):
            out.append(
                f.started(
                    run,
                    f"{ROOT}/{run}",
                    keep=draw(st.one_of(st.none(), st.integers(1, 4))),
                    attr=draw(st.sampled_from([None, "acc"])),
                    order=draw(st.sampled_from(["max", "min"])),
                    event_id=f"start-{run}",
                )
            )
    for counter in range(1, draw(st.integers(0, 40)) + 1):
        run = draw(st.sampled_from(runs))
        kind = draw(st.sampled_from(["ckpt", "ckpt", "ckpt", "metrics", "result", "restart", "dup", "done", "again"]))
        if kind == "ckpt":
            value = draw(SCORES)
            metrics = {} if value is None else {"acc": value}
            out.append(
                f.report(
                    run,
                    metrics,
                    f"{ROOT}/{run}/c{counter}",
                    validation=draw(st.booleans()),
                    event_id=event_id(draw, run, counter),
                )
            )
        elif kind == "metrics":
            out.append(f.report(run, {"loss": 1}, event_id=event_id(draw, run, counter)))
        elif kind == "result":
            target = draw(st.integers(0, counter))
            status = draw(st.sampled_from(["VALIDATED", "VALIDATION_FAILED", "VALIDATION_TIMEOUT"]))
            out.append(
                f.result(
                    run,
                    f"{ROOT}/{run}/c{target}",
                    status,
                    {"acc": draw(SCORES) or 0},
                    event_id=event_id(draw, run, counter),
                )
            )
        elif kind == "restart":
            out.append(f.restart(run, event_id=event_id(draw, run, counter)))
        elif kind == "done":  # a deletion completion, naming an eviction that may or may not be the one
            target, eviction = draw(st.integers(0, counter)), draw(st.integers(0, 3))
            out.append(
                f.settled(run, deleted=[(f"{ROOT}/{run}/c{target}", eviction)], event_id=event_id(draw, run, counter))
            )
        elif kind == "again":  # an earlier path reported again (rejected while live, else reused)
            target = draw(st.integers(0, counter))
            out.append(f.report(run, {"acc": 1}, f"{ROOT}/{run}/c{target}", event_id=event_id(draw, run, counter)))
        elif out:
            out.append(draw(st.sampled_from(out)))  # an exact redelivery
    return out


SETTINGS = FoldSettings(default_root=ROOT, outer_root=ROOT)
PROFILE = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run_all(lines: list[bytes], fold: Fold | None = None) -> tuple[Fold, list[Any]]:
    """Fold `lines`; the trace of outputs, deletions and rejections. Every output is checked against
    its published schema on the way (tests/unit/core/published.py), in every property that folds."""
    fold = fold or Fold(SETTINGS)
    trace = []
    for raw in lines:
        effects = fold.apply(f.event(raw))
        published.check(effects.outputs)
        trace.append(
            ([(o.type, repr(o.data)) for o in effects.outputs], [d.path for d in effects.deletions], effects.rejection)
        )
    return fold, trace


def state_bytes(fold: Fold) -> bytes:
    return encode(Snapshot("t", 0, 0, fold.settings, fold.runs))


@PROFILE
@given(logs())
def test_latest_and_pending_never_evicted(lines: list[bytes]) -> None:
    fold = Fold(SETTINGS)
    for raw in lines:
        effects = fold.apply(f.event(raw))
        published.check(effects.outputs)
        for run in fold.runs.values():
            kept = {c.key for c in run.checkpoints}
            if run.latest is not None:
                assert run.latest.key in kept
            assert set(run.pending) <= kept
            protected = {run.latest.path if run.latest else None} | {c.path for c in run.pending.values()}
            assert not {d.path for d in effects.deletions} & protected


@PROFILE
@given(logs())
def test_at_most_num_to_keep_non_exempt(lines: list[bytes]) -> None:
    fold, _ = run_all(lines)
    for run in fold.runs.values():
        if run.config.num_to_keep is None:
            continue
        exempt = set(run.pending) | ({run.latest.key} if run.latest else set())
        non_exempt = [c for c in run.checkpoints if c.key not in exempt]
        assert len(non_exempt) <= run.config.num_to_keep


@PROFILE
@given(logs())
def test_without_outputs_the_state_deletions_and_rejections_are_the_same(lines: list[bytes]) -> None:
    full, full_trace = run_all(lines)
    quiet, quiet_trace = run_all(lines, Fold(SETTINGS, emit=False))
    assert all(not outputs for outputs, _, _ in quiet_trace)
    assert [t[1:] for t in quiet_trace] == [t[1:] for t in full_trace]
    assert state_bytes(quiet) == state_bytes(full)


@PROFILE
@given(logs(), st.integers(0, 60))
def test_snapshot_restore_continue_equals_uninterrupted(lines: list[bytes], cut: int) -> None:
    cut = min(cut, len(lines))
    whole, whole_trace = run_all(lines)
    first, first_trace = run_all(lines[:cut])
    restored = decode(encode(Snapshot("t", 0, cut, first.settings, first.runs)))
    assert restored.next_offset == cut
    resumed, rest_trace = run_all(lines[cut:], Fold(restored.settings, restored.runs))
    assert first_trace + rest_trace == whole_trace
    assert state_bytes(resumed) == state_bytes(whole)


@PROFILE
@given(logs())
def test_same_log_same_state_and_outputs(lines: list[bytes]) -> None:
    one, trace_one = run_all(lines)
    two, trace_two = run_all(lines)
    assert trace_one == trace_two
    assert state_bytes(one) == state_bytes(two)


@PROFILE
@given(logs(runs=("a",)), logs(runs=("b", "c")), st.randoms(use_true_random=False))
def test_other_runs_interleaved_change_nothing(mine: list[bytes], others: list[bytes], rnd: Any) -> None:
    alone, alone_trace = run_all(mine)
    merged: list[tuple[bool, bytes]] = []
    a, b = list(mine), list(others)
    while a or b:
        take_mine = bool(a) and (not b or rnd.random() < 0.5)
        merged.append((take_mine, (a if take_mine else b).pop(0)))
    mixed, mixed_trace = run_all([raw for _, raw in merged])
    mine_trace = [t for (is_mine, _), t in zip(merged, mixed_trace, strict=False) if is_mine]
    assert mine_trace == alone_trace
    if "a" in alone.runs:
        assert canonical(run_view(mixed.runs["a"])) == canonical(run_view(alone.runs["a"]))
        assert state_bytes(Fold(SETTINGS, {"a": mixed.runs["a"]})) == state_bytes(alone)


# -- a direct transcription of contract §3 retention, O(n) like Ray, to check the fast one --


@PROFILE
@given(logs())
def test_matches_naive_model(lines: list[bytes]) -> None:
    """A naive model of the whole contract (docs/contract.md §3): lists, full sorts, full retention passes."""
    model: dict[str, dict[str, Any]] = {}
    fold = Fold(SETTINGS)
    for raw in lines:
        ev = f.event(raw)
        effects = fold.apply(ev)
        published.check(effects.outputs)
        if effects.rejection is not None or effects.duplicate:
            continue
        _naive_apply(model, ev)
    for run_id, run in fold.runs.items():
        assert [c.path for c in run.checkpoints] == [c["path"] for c in model[run_id]["cps"]], run_id


def _key(m: dict[str, Any], c: dict[str, Any]) -> tuple[Any, ...]:
    attr, order = m["attr"], m["order"]
    v = c["metrics"].get(attr) if attr else None
    ok = attr is not None and isinstance(v, (int, float)) and not isinstance(v, bool) and v == v
    return (ok, (v if order == "max" else -v) if ok else -math.inf, c["idx"])


def _naive_apply(model: dict[str, dict[str, Any]], ev: Any) -> None:
    m = model.setdefault(
        ev.subject, {"keep": None, "attr": None, "order": "max", "cps": [], "latest": None, "pending": [], "count": 0}
    )
    kind = ev.type.split(".")[1]
    if kind == "run_started":
        cfg = ev.data.checkpoint_config
        m.update(keep=cfg.num_to_keep, attr=cfg.checkpoint_score_attribute, order=cfg.checkpoint_score_order)
    elif kind == "report":
        idx = m["count"]
        m["count"] += 1
        if ev.data.checkpoint is None:
            return
        c = {"path": ev.data.checkpoint.path, "metrics": dict(ev.data.metrics), "idx": idx}
        m["cps"].append(c)
        m["latest"] = c
        if ev.data.validation:
            m["pending"].append(c)
    elif kind == "validation_result":
        hit = [c for c in m["pending"] if c["path"] == ev.data.checkpoint_path]
        if not hit:
            return
        m["pending"].remove(hit[0])
        if ev.data.status == "VALIDATED":
            hit[0]["metrics"].update(ev.data.metrics)
    else:
        return
    m["cps"].sort(key=lambda c: _key(m, c))
    if m["keep"] is not None:
        doomed = [c for c in m["cps"][: -m["keep"]] if c is not m["latest"] and c not in m["pending"]]
        m["cps"] = [c for c in m["cps"] if c not in doomed]


def _same_after_validation(view: dict[str, Any]) -> bool:
    """The view validates against the contract's model and the model keeps every key and value
    (it ignores unknown keys, so a key the fold adds without the model would pass unnoticed)."""
    model = RunView.model_validate(view)
    return canonical(model.model_dump()) == canonical(view)


@PROFILE
@given(logs())
def test_every_view_the_fold_builds_is_a_valid_run_view(lines: list[bytes]) -> None:
    """After every event, the view of its run (the one the processor would publish)."""
    fold = Fold(SETTINGS)
    for raw in lines:
        event = f.event(raw)
        fold.apply(event)
        run = fold.runs.get(event.subject)
        if run is not None:
            assert _same_after_validation(run_view(run))
