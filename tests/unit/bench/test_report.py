"""bench.report's options and the commands it records next to each figure."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import pytest

from bench import report


def test_full_defaults_reach_a_million_reports() -> None:
    args = report.parse([])
    assert args.sections == list(report.SECTIONS)
    assert args.ray_reports == 1_000_000 and args.history == [10_000, 100_000, 1_000_000]
    assert args.rates == [250, 500, 1000, 2000] and args.repeats == 3


def test_quick_is_smaller_and_explicit_flags_win() -> None:
    args = report.parse(["--quick", "--rates", "1000", "--sections", "latency,memory"])
    assert args.ray_reports < 100_000 and args.seconds < 20
    assert args.rates == [1000] and args.sections == ["latency", "memory"]


def test_unknown_section_is_refused() -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        report.sections("ray,kafka")
    with pytest.raises(SystemExit):
        report.parse(["--sections", "nope"])


def test_ints_accept_underscores() -> None:
    assert report.ints("10_000,1000000,") == [10_000, 1_000_000]


@pytest.mark.parametrize("name", report.SECTIONS)
def test_each_section_command_reproduces_its_sizes(name: str) -> None:
    args = report.parse(["--quick", "--ray-budget", "7.5", "--history", "5000,6000"])
    words = shlex.split(report.section_command(name, args))
    assert words[:5] == ["python", "-m", "bench.report", "--sections", name]
    again = report.parse([*words[3:], "--quick"])
    for flag in report.FLAGS[name]:
        assert getattr(again, flag) == getattr(args, flag), flag


def test_quick_writes_outside_the_repository(tmp_path: Path) -> None:
    doc, img, results = report.paths(report.parse(["--quick", "--out", str(tmp_path)]))
    assert doc == tmp_path / "benchmarks.md" and img == tmp_path / "img"
    assert doc.read_text() == (report.REPO / "docs/benchmarks.md").read_text()  # a copy to regenerate
    assert results.parent == img


def test_full_run_writes_the_docs() -> None:
    doc, img, _ = report.paths(report.parse([]))
    assert doc == report.REPO / "docs/benchmarks.md" and img == report.REPO / "docs/img"
