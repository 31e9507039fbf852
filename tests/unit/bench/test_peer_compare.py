"""bench/peer_compare.py without a broker: how it reads both sides' outputs and when it refuses a run."""

from __future__ import annotations

import os
from typing import Any

from bench import peer_compare
from bench.peer_compare import Outcome, Timed


def out(kind: str, run: str, data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return run, {"type": f"ckptlog.{kind}", "subject": run, "data": data}


def outcome(kept: list[str], evicted: set[str], mark: tuple[int, int]) -> Outcome:
    return Outcome(Timed(1.0, 1.0), {"run-0": kept}, {"run-0": evicted}, {"run-0": mark})


def test_evictions_are_sets_per_run_whatever_the_version_or_repeats() -> None:
    values = [
        out("checkpoint_evicted.v2", "a", {"checkpoint_path": "/a/1"}),
        out("checkpoint_registered.v1", "a", {"checkpoint_path": "/a/2"}),
        out("checkpoint_evicted.v2", "a", {"checkpoint_path": "/a/1"}),  # an at-least-once repeat
        out("checkpoint_evicted.v1", "b", {"checkpoint_path": "/b/1"}),
    ]
    assert peer_compare.evictions(values) == {"a": {"/a/1"}, "b": {"/b/1"}}


def test_the_last_watermark_is_the_highest_a_late_repeat_does_not_win() -> None:
    values = [
        out("watermark.v1", "a", {"committed": 3, "validated": 1}),
        out("watermark.v1", "a", {"committed": 5, "validated": 5}),
        out("watermark.v1", "a", {"committed": 4, "validated": 2}),
    ]
    assert peer_compare.last_watermarks(values) == {"a": (5, 5)}


def test_any_difference_is_named_with_its_run() -> None:
    ours = outcome(["/r/1", "/r/2"], {"/r/0"}, (3, 3))
    assert peer_compare.disagreement(ours, outcome(["/r/1", "/r/2"], {"/r/0"}, (3, 3))) is None
    order = peer_compare.disagreement(ours, outcome(["/r/2", "/r/1"], {"/r/0"}, (3, 3)))
    assert order is not None and order.startswith("kept of 'run-0'")  # the same set in another order differs
    evicted = peer_compare.disagreement(ours, outcome(["/r/1", "/r/2"], set(), (3, 3)))
    assert evicted is not None and evicted.startswith("evicted of 'run-0'")
    mark = peer_compare.disagreement(ours, outcome(["/r/1", "/r/2"], {"/r/0"}, (3, 2)))
    assert mark is not None and mark.startswith("watermarks of 'run-0'")
    missing = peer_compare.disagreement(ours, Outcome(Timed(1.0, 1.0), {}, {"run-0": {"/r/0"}}, {"run-0": (3, 3)}))
    assert missing is not None and "the peer None" in missing


def test_cpu_time_of_a_process_is_read_from_proc() -> None:
    spent = peer_compare.cpu_s(os.getpid())
    sum(range(2_000_000))
    assert peer_compare.cpu_s(os.getpid()) >= spent > 0


def test_quick_is_a_small_dense_run_and_flags_win() -> None:
    quick = peer_compare.parse(["--quick"])
    assert (quick.events, quick.repeats, quick.workloads) == (45_000, 1, ["dense"])
    assert quick.guarantees == ["exactly_once", "at_least_once"]
    full = peer_compare.parse(["--workloads", "sparse", "--repeats", "2"])
    assert (full.events, full.repeats, full.workloads) == (100_000, 2, ["sparse"])
