"""The Quix Streams peer's fold (bench/peer_fold.py) against ckptlog's own (`ckptlog fold`), no broker:
the same kept sets in the same order, the same evictions, the same last watermarks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench import peer_fold
from bench.processor import dense_events, sparse_events
from bench.workload import events
from ckptlog.processor.foldfile import fold_lines

ROOT = "file:///bench/runs"


def peer(lines: list[bytes]) -> tuple[dict[str, Any], dict[str, list[str]], dict[str, dict[str, int]]]:
    """(runs, evicted paths per run, last watermark per run), outputs checked as they come."""
    runs: dict[str, Any] = {}
    evicted: dict[str, list[str]] = {}
    last: dict[str, dict[str, int]] = {}
    for offset, line in enumerate(lines):
        event = json.loads(line)
        run, outputs = peer_fold.apply(runs.get(event["subject"]), event, f"in:0:{offset}")
        if run is not None:
            runs[event["subject"]] = run
        assert [o["id"] for o in outputs] == [f"peer:in:0:{offset}:{n}" for n in range(len(outputs))]
        for output in outputs:
            if output["type"] == peer_fold.EVICTED:
                evicted.setdefault(event["subject"], []).append(output["data"]["checkpoint_path"])
            else:
                last[event["subject"]] = output["data"]
        assert not outputs or outputs[-1]["type"] == peer_fold.WATERMARK  # the event's last output
    return runs, evicted, last


WORKLOADS = {
    "dense": lambda: dense_events(20_000, root=ROOT),
    "sparse": lambda: sparse_events(20_000, root=ROOT),
    "keep all, no validation": lambda: [line.rstrip(b"\n") for line in events(3_000, None, 0.0, root=ROOT)],
    "keep 1, half validated": lambda: [line.rstrip(b"\n") for line in events(5_000, 1, 0.5, runs=3, root=ROOT)],
}


@pytest.mark.parametrize("workload", WORKLOADS)
def test_peer_keeps_and_evicts_what_ckptlog_does(workload: str) -> None:
    lines = WORKLOADS[workload]()
    document = fold_lines(lines).document()
    assert not document["rejected"]
    runs, evicted, last = peer(lines)
    assert set(runs) == set(document["runs"])
    for run_id, view in document["runs"].items():
        assert peer_fold.kept_paths(runs[run_id]) == [c["path"] for c in view["checkpoints"]], run_id
        assert evicted.get(run_id, []) == view["evicted"], run_id
        assert last[run_id]["committed"] == view["committed"] and last[run_id]["validated"] == view["validated"]
    assert sum(map(len, evicted.values())) > 0 or workload.startswith("keep all")


def test_min_order_missing_scores_and_a_failed_validation() -> None:
    config = {"num_to_keep": 2, "checkpoint_score_attribute": "loss", "checkpoint_score_order": "min"}
    started = {"storage_path": "/r", "checkpoint_config": config}
    reports: list[dict[str, Any]] = [
        {"metrics": {"loss": 3.0}, "checkpoint": {"path": "/r/a"}},
        {"metrics": {}, "checkpoint": {"path": "/r/b"}},  # no score: ranks last
        {"metrics": {"loss": 1.0}, "checkpoint": {"path": "/r/c"}, "validation": True},
        {"metrics": {"loss": 2.0}, "checkpoint": {"path": "/r/d"}},
    ]
    lines = [_line("s", "run_started", started), *(_line(f"r{i}", "report", r) for i, r in enumerate(reports))]
    lines.append(_line("v", "validation_result", {"checkpoint_path": "/r/c", "status": "VALIDATION_FAILED"}))
    lines.append(_line("w", "validation_result", {"checkpoint_path": "/r/zz", "status": "VALIDATED"}))  # not pending
    document = fold_lines(lines).document()
    assert not document["rejected"]
    runs, evicted, last = peer(lines)
    view = document["runs"]["run"]
    assert peer_fold.kept_paths(runs["run"]) == [c["path"] for c in view["checkpoints"]] == ["/r/d", "/r/c"]
    assert evicted["run"] == view["evicted"] == ["/r/b", "/r/a"]
    assert last["run"] == {"committed": 4, "validated": 4, "generation": 0, "index_in_generation": 4}


def test_an_infinite_score_is_refused_loudly() -> None:
    run = peer_fold.new_run({"checkpoint_config": {"num_to_keep": 1, "checkpoint_score_attribute": "acc"}})
    with pytest.raises(ValueError, match="infinite"):
        peer_fold.sort_key(run, {"acc": float("inf")}, 0)


def _line(eid: str, kind: str, data: dict[str, Any]) -> bytes:
    envelope = {"specversion": "1.0", "id": eid, "source": "t", "type": f"ckptlog.{kind}.v1", "subject": "run"}
    return json.dumps({**envelope, "data": data}).encode()
