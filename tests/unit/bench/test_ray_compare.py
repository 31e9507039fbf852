"""The timing harness of bench.ray_compare: prefixes, windows and budgets, on a fake clock."""

from __future__ import annotations

import argparse
import asyncio

import pytest

from bench import ray_compare as rc


def lines_of(reports: int, extra_every: int = 0) -> list[bytes]:
    """Reports, with a non-report line after every `extra_every`-th one."""
    out = [b'{"type":"ckptlog.run_started.v1"}']
    for i in range(reports):
        out.append(b'{"type":"ckptlog.report.v1","n":%d}' % i)
        if extra_every and i % extra_every == extra_every - 1:
            out.append(b'{"type":"ckptlog.validation_result.v1"}')
    return out


def test_stamps_find_prefixes_and_skip_marks_beyond_the_stream() -> None:
    lines = lines_of(1_000, extra_every=10)
    stamps = rc.Stamps(lines, [1_000, 2_000])
    assert stamps.marks == [1_000]
    assert stamps.line_of(0) == 1 and stamps.line_of(10) == 12  # one result line after each 10 reports
    assert stamps.line_of(1_000) == len(lines)
    assert stamps.windows[1_000] == [900 + 10 * k for k in range(11)]


def test_points_from_a_clock_that_ticks_once_per_line() -> None:
    lines = lines_of(1_000)
    stamps = rc.Stamps(lines, [100, 1_000])
    ticks = iter(range(10**6))
    consumed = list(rc.timed(lines, stamps, clock=lambda: float(next(ticks))))
    assert consumed == lines
    points = stamps.points()
    assert [p.reports for p in points] == [100, 1_000]
    # every stamp read advanced the fake clock by one: the cumulative "seconds" counts stamps
    assert all(p.seconds > 0 and p.marginal_us > 0 for p in points)
    assert points[1].rate == pytest.approx(1_000 / points[1].seconds)


def test_marginal_cost_follows_a_cost_that_grows_with_history() -> None:
    lines = lines_of(10_000)
    stamps = rc.Stamps(lines, [1_000, 10_000])
    position = {"line": 0}

    def clock() -> float:  # line i costs i microseconds: a quadratic total
        i = position["line"]
        return i * (i - 1) / 2 * 1e-6

    for i, _ in enumerate(rc.timed(lines, stamps, clock=clock)):
        position["line"] = i + 1
    position["line"] = len(lines)
    first, last = stamps.points()
    assert 900 < first.marginal_us < 1_000 < 9_000 < last.marginal_us < 10_002
    assert last.marginal_us / first.marginal_us == pytest.approx(10, rel=0.05)


def test_a_partial_window_drops_the_mark() -> None:
    lines = lines_of(1_000)
    stamps = rc.Stamps(lines, [100, 1_000])
    for _i, _ in zip(range(500), rc.timed(lines, stamps), strict=False):
        pass
    assert [p.reports for p in stamps.points()] == [100]


def test_stopped_counts_reports_and_prices_the_last_ones() -> None:
    lines = lines_of(100)
    stamps = rc.Stamps(lines, [100])
    stamps.at = {0: 0.0, 50: 1.0}
    reports, last_us = rc._stopped(stamps, 60, 2.0)
    assert reports == 60  # report r is on line r + 1
    assert last_us == pytest.approx(1.0 / 11 * 1e6)  # lines 50..60 hold reports 49..59


def test_ckptlog_sides_measure_the_fold_on_a_small_stream() -> None:
    for side in ("ckptlog", "ckptlog-apply"):
        result = rc.measure(side, 5, 2_000, budget_s=1)
        assert [p.reports for p in result.points] == [1_000, 2_000]
        assert result.stopped_at is None and all(p.seconds > 0 for p in result.points)


def test_a_ray_pass_stops_at_its_budget() -> None:
    pytest.importorskip("ray.train.v2", reason="the ray extra is installed by make venv")
    lines = rc.stream(3_000, None)
    stamps = rc.Stamps(lines, [1_000, 2_000])
    result = asyncio.run(rc.ray_pass(lines, stamps, persist=False, budget_s=0.0))
    assert result.stopped_at is not None and result.stopped_at <= 1
    assert stamps.points() == []


def test_unknown_side_is_refused() -> None:
    with pytest.raises(ValueError):
        rc.measure("flink", 5, 10, 1)


@pytest.mark.parametrize(("text", "keep"), [("5", 5), ("none", None), ("All", None)])
def test_parse_keep(text: str, keep: int | None) -> None:
    assert rc.parse_keep(text) == keep


def test_parse_keep_refuses_zero() -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        rc.parse_keep("0")


def test_cli_arguments() -> None:
    args = rc.parser().parse_args(["--side", "ray-bare", "--keep", "none", "--reports", "10", "--json"])
    assert (args.side, args.keep, args.reports, args.json, args.budget) == ("ray-bare", None, 10, True, 300.0)
    with pytest.raises(SystemExit):
        rc.parser().parse_args(["--side", "spark"])
