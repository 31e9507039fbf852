"""A flood of refused (or failing) deletions costs few log lines and loses nothing (deletion_log.py).

The first refusal of a run logs its full line; the rest of the run's window are counted and
summarized in one line when the window passes or at close. Every refusal still reaches
`on_refused` and `counts.refused`; `Deleter.refused` keeps only the latest ones.
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptlog.processor.core.outputs import Deletion
from ckptlog.processor.storage.apply import delete_now
from ckptlog.processor.storage.claim_writer import ClaimWriter
from ckptlog.processor.storage.deletion import REFUSED_KEPT, Deleter, RetryPolicy
from ckptlog.processor.storage.deletion_log import WINDOW_S, DeletionLog, PerRunLog

LOGGER = "ckptlog.processor.storage.deletion"
OUTER = "file:///srv/ours"  # every path below lies outside it: check 1 refuses at submission
REFUSED = list[tuple[tuple[str, str], str]]


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def outside(run: str, n: int, start: int = 0) -> list[Deletion]:
    """`n` evictions of `run` under a root outside OUTER (as a misconfigured root would report them)."""
    root = f"file:///srv/theirs/{run}"
    return [Deletion(run, f"{root}/ckpt-{i:05d}", root, 0) for i in range(start, start + n)]


def lines(caplog: pytest.LogCaptureFixture, kind: str = "deletion_refused") -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"event={kind} ")]


def summaries(caplog: pytest.LogCaptureFixture, kind: str = "deletion_refused") -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"event={kind}_summary ")]


def more(line: str) -> int:
    found = re.search(r" more=(\d+) ", line)
    assert found is not None, line
    return int(found.group(1))


@pytest.mark.parametrize("per_call", [1, 100, 1000])
async def test_a_thousand_refusals_of_a_run_log_two_lines_and_all_reach_on_refused(
    per_call: int, caplog: pytest.LogCaptureFixture
) -> None:
    refused: REFUSED = []
    deleter = Deleter(outer_root=OUTER, on_refused=refused.extend, log_clock=Clock())
    todo = outside("run-5", 1000)
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        for at in range(0, 1000, per_call):
            assert deleter.submit_many(todo[at : at + per_call]) == 0
        assert len(lines(caplog)) == 1 and not summaries(caplog), "one full line, the rest counted"
        assert "'run-5'" in lines(caplog)[0] and todo[0].path in lines(caplog)[0]
        assert "fix the checkpoint path or the run's storage root" in lines(caplog)[0]
        await deleter.close()
    assert [k for k, _ in refused] == [(d.run_id, d.path) for d in todo], "every refusal, in order"
    assert deleter.counts.refused == 1000
    [summary] = summaries(caplog)
    assert more(summary) == 999 and f"path={todo[-1].path!r}" in summary and "run='run-5'" in summary
    assert "not strictly under" in summary or "storage root" in summary, "the last one's reason"
    assert len(caplog.records) == 2


async def test_each_run_gets_its_own_first_line_and_summary(caplog: pytest.LogCaptureFixture) -> None:
    refused: REFUSED = []
    deleter = Deleter(outer_root=OUTER, on_refused=refused.extend, log_clock=Clock())
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        deleter.submit_many(outside("a", 3) + outside("b", 5))  # one call, grouped by run
        deleter.submit_many(outside("a", 4, start=3))
        assert [re.search(r"run='(\w)'", line).group(1) for line in lines(caplog)] == ["a", "b"]  # type: ignore[union-attr]
        await deleter.close()
    assert sorted((re.search(r"run='(\w)'", s).group(1), more(s)) for s in summaries(caplog)) == [("a", 6), ("b", 4)]  # type: ignore[union-attr]
    assert len(refused) == deleter.counts.refused == 12


async def test_the_summary_comes_when_the_window_passes_and_a_new_window_logs_in_full(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    deleter = Deleter(outer_root=OUTER, log_clock=clock)
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        deleter.submit_many(outside("a", 10))
        clock.now += WINDOW_S - 1
        deleter.submit_many(outside("b", 1))  # a's window is still open: nothing of a's is written
        assert not summaries(caplog) and len(lines(caplog)) == 2
        clock.now += 1  # a's window has passed
        deleter.submit_many(outside("a", 2, start=10))
        [summary] = summaries(caplog)
        assert more(summary) == 9 and "ckpt-00009" in summary
        assert len(lines(caplog)) == 3 and "ckpt-00010" in lines(caplog)[-1], "a new window: a's full line again"
        await deleter.close()
    assert [more(s) for s in summaries(caplog)] == [9, 1], "b had nothing more; a's new window one more"


async def test_a_quiet_run_gets_its_summary_from_the_loop_without_another_refusal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger(LOGGER)
    lines_ = PerRunLog(log, logging.ERROR, "deletion_refused", "refused", "fix it", window_s=0.05)
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        assert lines_.note("a", [("p0", "why 0"), ("p1", "why 1"), ("p2", "why 2")]) == ("p0", "why 0")
        assert lines_.note("a", [("p3", "why 3")]) is None
        for _ in range(100):
            await asyncio.sleep(0.02)
            if summaries(caplog):
                break
    [summary] = summaries(caplog)
    assert more(summary) == 3 and "path='p3'" in summary and "why 3" in summary and summary.endswith("; fix it")
    assert lines_.open_windows == 0, "the window is forgotten once summarized"


async def test_the_windows_kept_are_those_of_runs_with_a_line_in_the_last_window() -> None:
    clock = Clock()
    deleter = Deleter(outer_root=OUTER, log_clock=clock)
    for n in range(500):
        deleter.submit_many(outside(f"r{n}", 2))
    assert deleter._log.open_windows == 500
    clock.now += WINDOW_S
    deleter.submit_many(outside("late", 1))
    assert deleter._log.open_windows == 1, "every passed window was summarized and dropped"
    await deleter.close()
    assert deleter._log.open_windows == 0


async def test_refused_keeps_only_the_latest_and_the_counts_keep_the_total() -> None:
    refused: REFUSED = []
    deleter = Deleter(outer_root=OUTER, on_refused=refused.extend)
    todo = outside("a", REFUSED_KEPT * 3)
    for at in range(0, len(todo), 7):
        deleter.submit_many(todo[at : at + 7])
    assert len(deleter.refused) == REFUSED_KEPT and deleter.counts.refused == len(refused) == len(todo)
    assert list(deleter.refused) == [(d.run_id, d.path) for d in todo[-REFUSED_KEPT:]], "the latest, oldest first"
    deleter.submit_many(todo[:1])  # refused again: the newest now
    assert list(deleter.refused)[-1] == (todo[0].run_id, todo[0].path) and len(deleter.refused) == REFUSED_KEPT
    await deleter.close()


def test_fold_apply_reports_every_refusal_beyond_the_kept_ones() -> None:
    todo = outside("a", REFUSED_KEPT + 500)
    messages = delete_now(todo, outer_root=OUTER)
    assert len(messages) == len(todo) and all(m.startswith("refused to delete ") for m in messages)
    assert {m.split()[3] for m in messages} == {d.path for d in todo}


async def test_a_flood_of_job_refusals_on_a_real_tree_touches_nothing_and_logs_per_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The bench's case: each run root holds the claim of the same run id from another input
    (a stale claim of an earlier deployment), so every job refuses every path; nothing is touched."""
    outer = f"file://{tmp_path}/runs"
    for run in ("a", "b"):
        for i in range(150):
            (tmp_path / "runs" / run / f"ckpt-{i:04d}").mkdir(parents=True)
            (tmp_path / "runs" / run / f"ckpt-{i:04d}" / "model.bin").write_bytes(b"precious")
    stale = ClaimWriter(outer_root=outer)
    stale.claim_many([(f"{outer}/a", "a"), (f"{outer}/b", "b")], "old-input[0]")
    assert await stale.drain(timeout=10)
    await stale.close()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    refused: REFUSED = []
    claims = ClaimWriter(outer_root=outer)
    deleter = Deleter(
        outer_root=outer, on_refused=refused.extend, claims=claims, retry=RetryPolicy(max_attempts=1), log_clock=Clock()
    )
    todo = [Deletion(r, f"{outer}/{r}/ckpt-{i:04d}", f"{outer}/{r}", 0) for r in ("a", "b") for i in range(150)]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert deleter.submit_many(todo, "new-input[0]") == 300  # accepted: the claims are met in the job
        await deleter.drain(timeout=30)
        await deleter.close()
    await claims.close()
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before, "nothing touched"
    assert sorted(k for k, _ in refused) == sorted((d.run_id, d.path) for d in todo) and deleter.counts.refused == 300
    assert all("old-input[0]" in why for _, why in refused), refused[0]
    assert len(lines(caplog)) == 2 and sum(more(s) for s in summaries(caplog)) == 298
    assert len(caplog.records) <= 4


def test_failures_and_drops_are_limited_per_run_too(caplog: pytest.LogCaptureFixture) -> None:
    log, clock = logging.getLogger(LOGGER), Clock()
    lines_ = DeletionLog(log, clock)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for i in range(1000):
            lines_.failed(("a", f"p{i}"), "PermissionError: denied", 1, 6, 0.1)
            lines_.exhausted(("a", f"p{i}"), "PermissionError: denied", 6)
            lines_.dropped(("b", f"p{i}"), "not owned here")
        assert [len(lines(caplog, k)) for k in ("deletion_failed", "deletion_exhausted", "deletion_dropped")] == [
            1,
            1,
            1,
        ]
        lines_.close()
    got = {
        k: more(s) for k in ("deletion_failed", "deletion_exhausted", "deletion_dropped") for s in summaries(caplog, k)
    }
    assert got == {"deletion_failed": 999, "deletion_exhausted": 999, "deletion_dropped": 999}
    assert "retry_failed()" in summaries(caplog, "deletion_exhausted")[0]
    assert len(caplog.records) == 6


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.integers(1, 5), st.sampled_from([0.0, 1.0, WINDOW_S / 2, WINDOW_S])),
        max_size=40,
    )
)
def test_every_path_is_either_a_full_line_or_counted_in_one_summary(
    calls: list[tuple[str, int, float]],
) -> None:
    """Whatever the calls and the clock: per run, full lines + summarized counts = paths noted, and
    a run writes at most one full line per window (one per `WINDOW_S` of clock, plus the first)."""
    clock, written = Clock(), []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            written.append(record.getMessage())

    log = logging.getLogger("test.per_run_log")
    log.propagate, handler = False, Capture()
    log.addHandler(handler)
    try:
        lines_ = PerRunLog(log, logging.ERROR, "x", "refused", "", clock)
        noted: dict[str, int] = {}
        full: dict[str, int] = {}
        start = clock.now
        for run, n, step in calls:
            clock.now += step
            noted[run] = noted.get(run, 0) + n
            if lines_.note(run, [(f"{run}{i}", "why") for i in range(n)]) is not None:
                full[run] = full.get(run, 0) + 1
        lines_.close()
    finally:
        log.removeHandler(handler)
    counted: dict[str, int] = {}
    for line in written:
        run = re.search(r"run='(\w)'", line).group(1)  # type: ignore[union-attr]
        counted[run] = counted.get(run, 0) + more(line)
    assert {r: full.get(r, 0) + counted.get(r, 0) for r in noted} == noted
    for n in full.values():
        assert n <= 1 + (clock.now - start) // WINDOW_S
