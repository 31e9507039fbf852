"""`ckptlog adopt-ray`'s plan on hostile experiment trees (ckptlog/integrations/ray_adopt.py): only
plain checkpoint directories inside the experiment are adopted, everything else is refused with a
reason and never reported (so ckptlog can never delete it); nothing on disk is touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ckptlog.client import ids
from ckptlog.integrations.ray_adopt import SNAPSHOT, NotAdoptable, plan


def write(experiment: Path, names: list[Any], indices: list[Any] | None = None, **extra: Any) -> None:
    results = [{"version": 0, "checkpoint_dir_name": n, "metrics": {"loss": i}} for i, n in enumerate(names)]
    state = {
        "checkpoint_results": results,
        "checkpoint_report_indices": indices if indices is not None else [10 * i for i in range(len(names))],
        "latest_checkpoint_result": results[-1] if results else None,
        "pending_training_results": [],
        **extra,
    }
    (experiment / SNAPSHOT).write_text(json.dumps(state))


def tree(tmp_path: Path, *dirs: str) -> Path:
    experiment = tmp_path / "storage" / "my-run"
    experiment.mkdir(parents=True)
    for name in dirs:
        (experiment / name).mkdir()
    return experiment


def test_checkpoints_are_adopted_in_rays_report_order(tmp_path: Path) -> None:
    experiment = tree(tmp_path, "checkpoint_a", "checkpoint_b", "checkpoint_c")
    write(experiment, ["checkpoint_b", "checkpoint_c", "checkpoint_a"], indices=[4, 9, 1])  # Ray: ranked
    adoption = plan(experiment)
    assert adoption.root == str(experiment) and adoption.skipped == []
    assert [(r.ray_index, Path(r.path).name) for r in adoption.reports] == [
        (1, "checkpoint_a"),
        (4, "checkpoint_b"),
        (9, "checkpoint_c"),
    ]
    assert adoption.latest == str(experiment / "checkpoint_a")  # Ray's latest_checkpoint_result


def test_hostile_names_symlinks_files_and_missing_dirs_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    experiment = tree(tmp_path, "ok")
    (experiment / "linked").symlink_to(outside)
    (experiment / "afile").write_text("x")
    hostile = ["ok", "../outside", str(outside), "linked", "afile", "gone", "", ".", "a/../../outside", "ok\n", 7]
    write(experiment, hostile)
    adoption = plan(experiment)
    assert [Path(r.path).name for r in adoption.reports] == ["ok"]
    refused = dict(adoption.skipped)
    assert set(refused) == {str(n) for n in hostile[1:]}
    assert "symlink" in refused["linked"] and "missing" in refused["gone"] and "not a directory" in refused["afile"]
    assert "plain directory name" in refused["../outside"] and "control character" in refused["ok\n"]
    assert outside.is_dir() and (experiment / "afile").read_text() == "x"  # nothing touched


def test_not_an_experiment_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NotAdoptable, match="not a directory"):
        plan(tmp_path / "nowhere")
    experiment = tree(tmp_path, "checkpoint_0")
    with pytest.raises(NotAdoptable, match=f"no {SNAPSHOT}"):
        plan(experiment)
    (tmp_path / "alias").symlink_to(experiment)
    write(experiment, ["checkpoint_0"])
    with pytest.raises(NotAdoptable, match="symlink"):
        plan(tmp_path / "alias")
    (experiment / SNAPSHOT).write_text("{not json")
    with pytest.raises(NotAdoptable, match="cannot be read"):
        plan(experiment)
    write(experiment, ["checkpoint_0"], indices=[0, 1])
    with pytest.raises(NotAdoptable, match="layout"):
        plan(experiment)


def test_adoption_ids_are_named_by_rays_report_index() -> None:
    assert ids.adopted_report_id("r", 3) == ids.adopted_report_id("r", 3)
    assert len({ids.adopted_report_id("r", 3), ids.adopted_report_id("r", 4), ids.adopted_report_id("s", 3)}) == 3


@pytest.mark.parametrize("metrics", [[1, 2], "loss=0.1", 7, True, 10**400], ids=["list", "str", "int", "bool", "huge"])
def test_metrics_that_are_not_an_object_refuse_the_adoption_naming_the_file_and_field(
    tmp_path: Path, metrics: Any
) -> None:
    """Issue 42 item 5: `dict(metrics or {})` raised (a traceback from `ckptlog adopt-ray`) or made
    nonsense of a list of pairs; now the adoption is refused before anything is sent."""
    experiment = tree(tmp_path, "checkpoint_a", "checkpoint_b")
    write(experiment, ["checkpoint_a", "checkpoint_b"])
    state = json.loads((experiment / SNAPSHOT).read_text())
    state["checkpoint_results"][1]["metrics"] = metrics
    (experiment / SNAPSHOT).write_text(json.dumps(state))
    with pytest.raises(NotAdoptable) as refused:
        plan(experiment)
    message = str(refused.value)
    assert str(experiment / SNAPSHOT) in message and "checkpoint_results[1].metrics" in message
    assert "'checkpoint_b'" in message and "nothing was sent" in message


def test_pending_validations_that_are_not_a_list_refuse_the_adoption(tmp_path: Path) -> None:
    experiment = tree(tmp_path, "checkpoint_a")
    write(experiment, ["checkpoint_a"], pending_training_results=5)
    with pytest.raises(NotAdoptable, match=r"pending_training_results is the int 5, not a list"):
        plan(experiment)


def test_absent_or_null_metrics_adopt_with_none(tmp_path: Path) -> None:
    experiment = tree(tmp_path, "checkpoint_a", "checkpoint_b")
    write(experiment, ["checkpoint_a", "checkpoint_b"])
    state = json.loads((experiment / SNAPSHOT).read_text())
    state["checkpoint_results"][0]["metrics"] = None
    del state["checkpoint_results"][1]["metrics"]
    (experiment / SNAPSHOT).write_text(json.dumps(state))
    assert [r.metrics for r in plan(experiment).reports] == [{}, {}]


def test_the_command_answers_a_bad_metrics_field_with_the_error_not_a_traceback(tmp_path: Path) -> None:
    experiment = tree(tmp_path, "checkpoint_a")
    write(experiment, ["checkpoint_a"])
    state = json.loads((experiment / SNAPSHOT).read_text())
    state["checkpoint_results"][0]["metrics"] = "loss=0.1"  # dict("loss=0.1") raised ValueError
    (experiment / SNAPSHOT).write_text(json.dumps(state))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}
    done = subprocess.run(
        [sys.executable, "-m", "ckptlog", "adopt-ray", str(experiment), "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and "checkpoint_results[0].metrics" in done.stderr
