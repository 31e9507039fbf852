"""bench.fleet at a small size: the state it builds is the fold's, and what it reports adds up."""

from __future__ import annotations

from bench import fleet


def test_structured_ids_keep_a_range_and_foreign_ids_a_window() -> None:
    structured = fleet.build(runs=3, reports=40, keep=5, ids="structured")
    foreign = fleet.build(runs=3, reports=40, keep=5, ids="foreign")
    assert structured["kept"] == foreign["kept"] in (15, 16, 17, 18)  # 5 each, the latest maybe beside them
    # a range per run against 41 ids each (its start and 40 reports); completions are not remembered
    assert structured["dedup_per_run_b"] < 1024 < foreign["dedup_per_run_b"]
    assert structured["runs"] == 3 and structured["rss_mib"] >= structured["idle_mib"] > 0
