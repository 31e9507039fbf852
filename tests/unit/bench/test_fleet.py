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


def test_validated_runs_remember_their_results_as_out_of_order_numbers() -> None:
    """An Evaluator's result ids number the request's offset: sparse, 4 B each among the run's last W
    applications (contract §3), against a string each for foreign ones."""
    plain = fleet.build(runs=2, reports=60, keep=5, ids="structured")
    structured = fleet.build(runs=2, reports=60, keep=5, ids="structured", validated=True)
    foreign = fleet.build(runs=2, reports=60, keep=5, ids="foreign", validated=True)
    assert structured["validated"] and structured["kept"] == foreign["kept"] == 10
    assert plain["outstanding"] == structured["outstanding"] == foreign["outstanding"] == 0
    # the first result starts the producer's range; 59 out-of-order numbers at 4 B in one block, plus
    # that mark and block (under 512 B), over the plain run's state: far below 60 strings
    assert plain["dedup_per_run_b"] + 59 * 4 <= structured["dedup_per_run_b"] < plain["dedup_per_run_b"] + 59 * 4 + 512
    assert structured["dedup_per_run_b"] < foreign["dedup_per_run_b"] / 5
