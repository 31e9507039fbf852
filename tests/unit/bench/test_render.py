"""The generated section and the verdicts on issue 16's targets, from synthetic results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import render, targets
from bench.markdown import BEGIN, END


def rec(data: Any, command: str = "python -m bench.report --sections x") -> dict[str, Any]:
    return {"when": "2026-12-01 03:00 UTC", "commit": "abc1234", "command": command, "quick": False, "data": data}


def dense(eo: float, alo: float, bare: float = 40_000.0) -> list[dict[str, Any]]:
    row = {"workload": "dense", "bare": bare, "exactly_once": eo * bare, "at_least_once": alo * bare, "fanout": 3.0}
    row["exactly_once, deletions stubbed"] = bare * 0.6
    row["bare, 3 copies"] = bare * 0.4
    return [row, {"workload": "sparse", "bare": bare, "exactly_once": bare, "at_least_once": bare}]


def test_dense_throughput_met_only_when_every_run_clears_the_bar() -> None:
    assert targets.dense_throughput(rec([dense(0.6, 0.55)] * 3))[2] == "met"
    missed = targets.dense_throughput(rec([dense(0.6, 0.55), dense(0.49, 0.7), dense(0.6, 0.6)]))
    assert missed[2] == "missed" and "0.49" in str(missed[3]) and "3.0 records" in str(missed[3])
    assert targets.dense_throughput(rec([dense(0.9, 0.9)] * 2))[2] == "not shown"
    assert "goal met" in str(targets.dense_throughput(rec([dense(0.85, 0.81)] * 3))[3])


def issue_25(eo: float, alo: float, same: float = 0.5, bare: float = 40_000.0) -> list[dict[str, Any]]:
    """A dense row with issue 25's variants: `eo`/`alo` as ratios to the same-records loop."""
    rows = dense(0.3, 0.3, bare)
    del rows[0]["bare, 3 copies"]
    rows[0]["bare, 2 copies"] = same * bare
    rows[0]["exactly_once, checkpoints not on disk"] = eo * same * bare
    rows[0]["at_least_once, checkpoints not on disk"] = alo * same * bare
    return rows


def test_issue_25_judges_the_variants_without_files_against_both_loops() -> None:
    assert targets.same_records(rec([issue_25(0.95, 0.91, same=0.6)] * 3))[2] == "met"
    below = targets.same_records(rec([issue_25(0.95, 0.91), issue_25(0.89, 0.95), issue_25(0.95, 0.95)]))
    assert below[2] == "missed" and "0.89× the same-records loop" in str(below[3])
    slow_loop = targets.same_records(rec([issue_25(0.95, 0.95, same=0.4)] * 3))  # 0.38x the one-record loop
    assert slow_loop[2] == "missed" and "0.38× the one-record loop" in str(slow_loop[3])
    assert "same-records" not in str(slow_loop[3])
    assert targets.same_records(rec([issue_25(1, 1, same=0.6)] * 2))[2] == "not shown"
    assert targets.same_records(rec([dense(0.9, 0.9)] * 3))[2] == "not measured"  # an older run: no such variant


def issue_39(
    eo: float, alo: float, sparse_eo: float, sparse_alo: float, bare: float = 40_000.0
) -> list[dict[str, Any]]:
    """Dense `eo`/`alo` as ratios to the 2-copy loop (0.5× bare), sparse ones to the one-record loop."""
    rows = issue_25(1, 1, same=0.5, bare=bare)
    rows[0]["exactly_once"], rows[0]["at_least_once"] = eo * 0.5 * bare, alo * 0.5 * bare
    rows[1]["exactly_once"], rows[1]["at_least_once"] = sparse_eo * bare, sparse_alo * bare
    return rows


def test_issue_39_judges_real_files_against_the_same_records_loop_and_sparse_against_the_bare_one() -> None:
    met = targets.issue_39_throughput(rec([issue_39(0.75, 0.71, 1.02, 1.0)] * 3))
    assert met[2] == "met" and "dense 0.75/0.71" in str(met[1]) and "sparse 1.02/1.00" in str(met[1])
    slow = targets.issue_39_throughput(rec([issue_39(0.75, 0.71, 1.02, 1.0)] * 2 + [issue_39(0.69, 0.8, 1.1, 1.1)]))
    assert slow[2] == "missed" and "dense 0.69×" in str(slow[3])
    sparse = targets.issue_39_throughput(rec([issue_39(0.9, 0.9, 0.99, 1.2)] * 3))
    assert sparse[2] == "missed" and "sparse 0.99×" in str(sparse[3])
    assert targets.issue_39_throughput(rec([issue_39(0.9, 0.9, 1.1, 1.1)] * 2))[2] == "not shown"
    busy = rec([issue_39(0.75, 0.71, 1.02, 1.0)] * 3) | {"host": {"cpus": 2, "load": [9.0, 9.0, 11.2]}}
    shown = targets.issue_39_throughput(busy)
    assert shown[2] == "not shown" and "load was 11.2 on 2 CPUs" in str(shown[3])
    calm = rec([issue_39(0.75, 0.71, 1.02, 1.0)] * 3) | {"host": {"cpus": 2, "load": [5.0, 4.0, 3.9]}}
    assert targets.issue_39_throughput(calm)[2] == "met"
    busy_miss = rec([issue_39(0.69, 0.71, 1.02, 1.0)] * 3) | {"host": {"cpus": 2, "load": [9.0, 9.0, 11.2]}}
    assert targets.issue_39_throughput(busy_miss)[2] == "missed"
    no_loop = dense(0.9, 0.9)
    del no_loop[0]["bare, 3 copies"]  # bench.processor runs it only when the processor writes over 1 record per input
    assert targets.issue_39_throughput(rec([no_loop] * 3))[2] == "not measured"


def test_cpu_per_event_is_shown_beside_the_rates_where_measured() -> None:
    rows = issue_39(0.75, 0.71, 1.02, 1.0)
    rows[0]["cpu_us"] = {"bare": 12.0, "exactly_once": 40.0, "at_least_once": 36.0, "bare, 2 copies": 24.0}
    text = "\n".join(render.e2e_section(rec([rows] * 3), None))
    assert "| 1 | dense | 12 | 40 | 36 | — | — | — | 24, 2 copies |" in text
    assert "CPU µs per event" not in "\n".join(render.e2e_section(rec([issue_39(0.75, 0.71, 1.02, 1.0)]), None))
    verdict = targets.issue_39_throughput(rec([rows] * 3))
    assert "by CPU time per event, dense 0.60–0.67× the same-records loop" in str(verdict[3])


def peer_row(workload: str, guarantee: str, ratio: float, first: bool = False) -> dict[str, Any]:
    return {
        "workload": workload,
        "guarantee": guarantee,
        "events": 100_000,
        "ckptlog": 30_000.0,
        "peer": 30_000.0 / ratio,
        "ckptlog_cpu_us": 30.0,
        "peer_cpu_us": 60.0,
        "peer_first": first,
        "kept": 60,
        "evicted": 90_000,
        "load": 1.5,
    }


def test_against_the_peer_every_run_must_clear_one_and_a_half() -> None:
    rows = [peer_row(w, g, 1.6) for w in ("dense", "sparse") for g in ("exactly_once", "at_least_once")]
    met = targets.against_peer(rec(rows))
    assert met[2] == "met" and "dense exactly_once 1.60" in str(met[1]) and "2.00× ckptlog's" in str(met[3])
    missed = targets.against_peer(rec([*rows, peer_row("sparse", "at_least_once", 1.49, first=True)]))
    assert missed[2] == "missed" and "lowest 1.49×" in str(missed[3])
    text = "\n".join(render.peer_section(rec(rows), None))
    assert "| 1 | dense | exactly_once | 30,000 | 18,750 | 1.60× | 30 | 60 | 2.00× | ckptlog | 1.5 |" in text


@pytest.mark.parametrize(("p99", "status"), [(0.149, "met"), (0.151, "missed")])
def test_latency_target(p99: float, status: str) -> None:
    rows = [{"rate": 500, "p50": 0.01, "p99": 0.9, "max": 1}, {"rate": 1000, "p50": 0.02, "p99": p99, "max": 1}]
    assert targets.latency(rec(rows))[2] == status


def restarts(*times: float) -> dict[str, Any]:
    history = [
        {"history": 10 ** (4 + i), "snapshot_every": 10_000, "replayed": 0, "in_process": t / 2, "new_process": t}
        for i, t in enumerate(times)
    ]
    return {"history": history, "intervals": []}


def test_restart_flat() -> None:
    assert targets.restart_flat(rec(restarts(0.6, 0.7, 0.8)))[2] == "met"
    assert targets.restart_flat(rec(restarts(0.6, 0.7, 1.0)))[2] == "missed"  # 1.67× the shortest
    assert targets.restart_flat(rec(restarts(1.9, 2.5)))[2] == "missed"  # flat but over 2 s


def test_unmeasured_sections_say_so() -> None:
    rows = targets.targets({})
    assert len(rows) == 9 and all(row[2] == "not measured" for row in rows)


def ray_data() -> dict[str, Any]:
    def side(name: str, costs: list[float], stopped: int | None = None) -> dict[str, Any]:
        points = [
            {"reports": n, "seconds": n * c * 1e-6, "marginal_us": c}
            for n, c in zip((1_000, 10_000), costs, strict=False)
        ]
        return {"side": name, "keep": 5, "points": points, "stopped_at": stopped, "last_us": 900.0 if stopped else None}

    passes = [
        side("ckptlog", [12.0, 13.0]),
        side("ckptlog-apply", [9.0, 10.0]),
        side("ray-bare", [100.0], 5_000),
        side("ray", [700.0, 800.0]),
        side("ckptlog-apply", [9.5, 10.5]),
    ]
    return {"5": passes}


def test_ray_table_and_verdict() -> None:
    lines = render.ray_section(rec(ray_data()), "img/fold_vs_ray.png")
    text = "\n".join(lines)
    assert "![Fold throughput against Ray Train's CheckpointManager](img/fold_vs_ray.png)" in text
    assert "| ckptlog Fold.apply (again, after Ray) | time: Ray bookkeeping ÷ Fold.apply |" in text
    assert "| 1,000 | 83,333 | 111,111 | 10,000 | 1,429 | 105,263 | 11× |" in text  # reports/s
    assert "| 10,000 | 76,923 | 100,000 | — | 1,250 | 95,238 | — |" in text
    assert "| 1,000 | 12.0 | 9.00 | 100 | 700 | 9.50 | 11× |" in text  # µs per report at that size
    assert "| 10,000 | 13.0 | 10.0 | — | 800 | 10.5 | — |" in text
    assert "budget spent after 5,000 reports" in text
    verdict = targets.ray(rec(ray_data()))
    assert verdict[2] == "shown" and "stopped at their time budget" in str(verdict[3])


def test_render_lists_every_section_with_command_and_commit() -> None:
    results = {"latency": rec([{"rate": 1000, "p50": 0.02, "p99": 0.1, "max": 0.2, "seen": 9, "sent": 10}], "CMD-L")}
    text = render.render(results, {"latency": "img/l.png"})
    assert "`CMD-L` — 2026-12-01 03:00 UTC, commit `abc1234`" in text
    assert "| 1,000 | 20 | 100 | 200 | 9 / 10 |" in text
    assert (
        "| 2. p99 report → committed watermark ≤ 150 ms at 1,000/s, exactly_once | p50 20 ms, p99 100 ms | met |"
        in text
    )
    assert "End to end" not in text  # only measured sections


def test_write_report_keeps_the_hand_written_text(tmp_path: Path) -> None:
    doc = tmp_path / "docs/benchmarks.md"
    doc.parent.mkdir()
    doc.write_text("# Benchmarks\n\nby hand\n")
    results = {
        "latency": rec(
            [
                {"rate": 500, "p50": 0.01, "p99": 0.05, "max": 0.1, "seen": 1, "sent": 1},
                {"rate": 1000, "p50": 0.02, "p99": 0.2, "max": 0.3, "seen": 1, "sent": 1},
            ]
        )
    }
    render.write_report(results, doc, tmp_path / "docs/img")
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n\nby hand\n") and BEGIN in text and text.rstrip().endswith(END)
    assert (tmp_path / "docs/img/latency_vs_rate.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](img/latency_vs_rate.png)" in text and "| missed |" in text
