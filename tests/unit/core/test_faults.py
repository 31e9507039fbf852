"""Folding one record is all or nothing (contract §7): a fault part-way through applying an event is
rolled back, the event is rejected as `internal_error`, and the fold goes on exactly as a clean
fold of the log without that event.

Faults are injected into the functions an event's application calls (scoring, the kept list,
the nesting index, retention's bookkeeping, the outputs, remembering its id), on their n-th call,
at a random event of a random log (tests/unit/core/test_fold_properties.py's `logs`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ckptlog.events.rejections import Reason
from ckptlog.processor.core import dedup, lifecycle, marks, retention
from ckptlog.processor.core import fold as fold_module
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.nesting import Nesting
from ckptlog.processor.core.ordering import SortedRecords
from tests import factories as f
from tests.unit.core.test_fold_properties import SETTINGS, logs, run_all, state_bytes

pytestmark = pytest.mark.from_source  # it replaces the fold's functions: against the sources (tests/compiled.py)


class Injected(RuntimeError):
    """The fault: nothing in ckptlog raises it."""


#: (owner, attribute) pairs whose calls the fault can hit.
SITES: list[tuple[Any, str]] = [
    (fold_module, "score"),
    (fold_module, "watermark"),
    (lifecycle, "watermark"),
    (retention, "_new"),  # an eviction half done (its outstanding entry, then the result built)
    (SortedRecords, "add"),
    (SortedRecords, "remove"),
    (SortedRecords, "pop"),
    (Nesting, "add"),
    (Nesting, "discard"),
    (dedup, "render"),  # after the fast path moved the mark
    (dedup, "absorb"),
    (marks, "insert"),
    (marks, "Block"),  # a new block, after older ones were dropped
    (marks, "array"),  # a block widened to 8-byte numbers, or a full one trimmed
    (marks, "bisect_right"),  # absorbing, after earlier blocks gave numbers to the range
    (dedup.Seen, "_foreign"),
    (dedup.Seen, "_drop_stale"),
]


@contextmanager
def fault(owner: Any, name: str, on_call: int) -> Iterator[list[int]]:
    """Make `owner.name` raise on its `on_call`-th call; yields the count of calls seen."""
    real = getattr(owner, name)
    seen = [0]

    def faulty(*args: Any, **kwargs: Any) -> Any:
        seen[0] += 1
        if seen[0] == on_call:
            raise Injected(f"injected into {name}")
        return real(*args, **kwargs)

    setattr(owner, name, faulty)
    try:
        yield seen
    finally:
        setattr(owner, name, real)


@contextmanager
def counting() -> Iterator[dict[tuple[Any, str], int]]:
    """Count the calls every site sees (no fault)."""
    counts: dict[tuple[Any, str], int] = {}
    reals = [(owner, name, getattr(owner, name)) for owner, name in SITES]

    def counter(site: tuple[Any, str], real: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[site] = counts.get(site, 0) + 1
            return real(*args, **kwargs)

        return counted

    for owner, name, real in reals:
        setattr(owner, name, counter((owner, name), real))
    try:
        yield counts
    finally:
        for owner, name, real in reals:
            setattr(owner, name, real)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(logs(), st.data())
def test_a_fault_leaves_the_run_as_before_and_the_fold_goes_on(lines: list[bytes], data: st.DataObject) -> None:
    probe, calls = Fold(SETTINGS), []  # (event index, site, calls of the site while applying it)
    for index, raw in enumerate(lines):
        with counting() as counts:
            probe.apply(f.event(raw))
        calls += [(index, site, n) for site, n in counts.items()]
    if not calls:
        event("no fault: no event calls a site")
        return
    by_site = sorted({site for _, site, _ in calls}, key=lambda s: f"{s[0]}.{s[1]}")
    site = data.draw(st.sampled_from(by_site))  # every site the log reaches is as likely
    at, _, count = data.draw(st.sampled_from([c for c in calls if c[1] == site]))
    on_call = data.draw(st.integers(1, count))
    event(f"fault in {getattr(site[0], '__name__', site[0])}.{site[1]}")
    fold, _ = run_all(lines[:at])
    before = state_bytes(fold)
    with fault(*site, on_call):
        effects = fold.apply(f.event(lines[at]))
    assert effects.rejection is not None and effects.rejection.reason == Reason.INTERNAL_ERROR
    assert effects.rejection.exception == "Injected" and "injected into" in effects.rejection.message
    assert not effects.outputs and not effects.deletions
    assert state_bytes(fold) == before, "the run changed although applying the event failed"
    resumed, rest = run_all(lines[at + 1 :], fold)
    clean, clean_trace = run_all(lines[:at] + lines[at + 1 :])
    assert rest == clean_trace[at:]
    assert state_bytes(resumed) == state_bytes(clean)


def test_the_faulty_event_is_not_remembered_as_seen() -> None:
    """A redelivery of an event that hit a fault is applied (the fault may have been transient)."""
    fold = Fold(SETTINGS)
    raw = f.report("a", {"acc": 1}, "file:///data/a/c1", event_id="e1")
    with fault(SortedRecords, "add", 1):
        assert fold.apply(f.event(raw)).rejection is not None
    effects = fold.apply(f.event(raw))
    assert effects.rejection is None and not effects.duplicate
    assert [c.path for c in fold.runs["a"].checkpoints] == ["file:///data/a/c1"]


def test_a_kept_list_that_cannot_be_undone_is_rebuilt(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault in retention after a record left the (block-stored) kept list, and the list then
    refusing to take it back (as if the fault had broken it): the list is rebuilt from the kept
    records and the run is exactly as before."""
    lines = [f.started("a", "file:///data/a", keep=5000, attr="acc")]
    lines += [f.report("a", {"acc": (i * 37) % 101}, f"file:///data/a/c{i}") for i in range(5000)]
    fold, _ = run_all(lines)
    before = state_bytes(fold)
    broken = {"now": False}
    real_add = SortedRecords.add

    def add(self: SortedRecords, record: Any) -> int:
        if broken["now"]:
            raise Injected("the kept list refuses every insert")
        return real_add(self, record)

    def evicted(*args: Any) -> Any:
        broken["now"] = True
        raise Injected("retention fails after popping its victim")

    monkeypatch.setattr(SortedRecords, "add", add)
    monkeypatch.setattr(retention, "Evicted", evicted)
    effects = fold.apply(f.event(f.report("a", {"acc": 50}, "file:///data/a/new", event_id="x")))
    monkeypatch.undo()
    assert effects.rejection is not None and effects.rejection.reason == Reason.INTERNAL_ERROR
    assert state_bytes(fold) == before
    assert [r.sort_key for r in fold.runs["a"].checkpoints] == sorted(r.sort_key for r in fold.runs["a"].checkpoints)
    assert fold.apply(f.event(f.report("a", {"acc": 50}, "file:///data/a/new", event_id="x"))).deletions


@pytest.mark.parametrize("config", [{"keep_every_n_steps": 2}, {"keep_time_interval_s": 60}])
def test_a_fault_after_preserving_restores_the_preserved_counters(config: dict[str, Any]) -> None:
    """Retention beyond Ray moves `preserved_at` and `preserved_count` before the kept list is
    touched; a fault after that (here in the kept list's insert) must put both back. The random
    logs above never preserve, so this case is spelled out (a mutation skipping them went unseen)."""
    body = json.loads(f.started("a", "file:///data/a", keep=1, attr="acc"))
    body["data"]["checkpoint_config"].update(config)
    lines = [json.dumps(body).encode()]
    for i in range(4):
        when = f"2026-11-30T12:{i * 2:02d}:00Z"
        lines.append(f.report("a", {"acc": i / 10}, f"file:///data/a/c{i}", time=when))
    fold, _ = run_all(lines[:-1])
    before, run = state_bytes(fold), fold.runs["a"]
    counters = (run.rule_state.get("preserved_at"), run.preserved_count)
    assert run.preserved_count > 0  # the case is only a test if something was preserved already
    with fault(SortedRecords, "add", 1):
        effects = fold.apply(f.event(lines[-1]))
    assert effects.rejection is not None and effects.rejection.reason == Reason.INTERNAL_ERROR
    assert (run.rule_state.get("preserved_at"), run.preserved_count) == counters
    assert state_bytes(fold) == before
