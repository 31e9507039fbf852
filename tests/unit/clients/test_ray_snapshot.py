"""Ray's snapshot reconciled with ckptlog's deletions (ckptlog/integrations/ray_snapshot.py), on a
real directory tree: only ranked checkpoints that are gone are dropped; the latest and pending
ones, and every status list, stay as Ray wrote them; an unknown layout is left alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ckptlog.integrations.ray_snapshot import reconcile


def result(name: str, loss: float) -> dict[str, Any]:
    return {"version": 0, "checkpoint_dir_name": name, "metrics": {"loss": loss}}


def ray_state(names: list[str], latest: str, pending: list[str]) -> dict[str, Any]:
    return {
        "ray_version": "2.59.0",
        "checkpoint_results": [result(n, i) for i, n in enumerate(names)],
        "checkpoint_report_indices": list(range(len(names))),
        "latest_checkpoint_result": result(latest, 0.0),
        "pending_training_results": [result(n, 0.0) for n in pending],
        "pending_validation_specs": [True for _ in pending],
        "current_report_index": len(names),
        "validated_checkpoint_dir_names": list(names),
        "timed_out_validation_checkpoint_dir_names": [],
        "failed_validation_checkpoint_dir_names": [],
    }


def on(tree: Path) -> Any:
    return lambda name: (tree / name).is_dir()


def test_gone_ranked_checkpoints_are_dropped_with_their_index_and_status(tmp_path: Path) -> None:
    names = ["checkpoint_0", "checkpoint_1", "checkpoint_2", "checkpoint_3"]
    for name in ("checkpoint_1", "checkpoint_3"):
        (tmp_path / name).mkdir()
    text, gone = reconcile(json.dumps(ray_state(names, "checkpoint_3", [])), on(tmp_path))
    state = json.loads(text)
    assert gone == ["checkpoint_0", "checkpoint_2"]
    assert [r["checkpoint_dir_name"] for r in state["checkpoint_results"]] == ["checkpoint_1", "checkpoint_3"]
    assert state["checkpoint_report_indices"] == [1, 3]  # each index stays with its checkpoint
    assert state["validated_checkpoint_dir_names"] == ["checkpoint_1", "checkpoint_3"]
    assert state["current_report_index"] == 4


def test_a_missing_latest_or_pending_checkpoint_is_left_for_ray_to_refuse(tmp_path: Path) -> None:
    """ckptlog never deletes them: one that is missing is damage, and Ray's own error must stand."""
    names = ["checkpoint_0", "checkpoint_1", "checkpoint_2"]
    text, gone = reconcile(json.dumps(ray_state(names, "checkpoint_2", ["checkpoint_1"])), on(tmp_path))
    assert gone == ["checkpoint_0"]
    kept = [r["checkpoint_dir_name"] for r in json.loads(text)["checkpoint_results"]]
    assert kept == ["checkpoint_1", "checkpoint_2"]


def test_a_symlink_to_a_deleted_directory_counts_as_gone_and_a_file_is_not_a_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "checkpoint_0").symlink_to(tmp_path / "vanished")  # dangling
    (tmp_path / "checkpoint_1").write_text("not a directory")
    (tmp_path / "checkpoint_2").mkdir()
    names = ["checkpoint_0", "checkpoint_1", "checkpoint_2"]
    _, gone = reconcile(json.dumps(ray_state(names, "checkpoint_2", [])), on(tmp_path))
    assert gone == ["checkpoint_0", "checkpoint_1"]
    assert (tmp_path / "elsewhere").is_dir() and (tmp_path / "checkpoint_1").is_file()  # nothing touched


def test_nothing_gone_or_an_unknown_layout_comes_back_unchanged(tmp_path: Path) -> None:
    (tmp_path / "checkpoint_0").mkdir()
    text = json.dumps(ray_state(["checkpoint_0"], "checkpoint_0", []))
    assert reconcile(text, on(tmp_path)) == (text, [])
    for odd in ({"checkpoint_results": []}, [], {**json.loads(text), "checkpoint_report_indices": [0, 1]}):
        assert reconcile(json.dumps(odd), on(tmp_path)) == (json.dumps(odd), [])
