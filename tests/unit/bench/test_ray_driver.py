"""Ray Train's own CheckpointManager and ckptlog's fold on the same small streams: a differential
check of the comparison's premise (same streams, same retention), and of the harness itself."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest

pytest.importorskip("ray.train.v2", reason="the ray extra is installed by make venv")

from bench.ray_driver import RayRuns
from bench.workload import events
from ckptlog.processor.foldfile import fold_lines

Kept = dict[str, tuple[list[str], str | None]]


def ray_fold(lines: list[bytes], root: Path, persist: bool = False) -> tuple[Kept, list[str]]:
    async def go() -> tuple[Kept, list[str]]:
        with RayRuns(root, persist=persist) as ray:
            for line in lines:
                item = ray.decode(line)
                if item is not None:
                    ray.apply(item)
            await asyncio.sleep(0)
            return ray.kept(), ray.deleted

    return asyncio.run(go())


def ckptlog_fold(lines: list[bytes]) -> tuple[Kept, list[str]]:
    result = fold_lines(lines)
    assert not result.rejected
    kept: Kept = {}
    for run_id, view in result.document()["runs"].items():
        names = [c["path"].rsplit("/", 1)[1] for c in view["checkpoints"]]
        kept[run_id] = (names, view["latest"].rsplit("/", 1)[1] if view["latest"] else None)
    evicted = [f"{run}/{path.rsplit('/', 1)[1]}" for run, paths in result.evicted.items() for path in paths]
    return kept, evicted


def test_benchmark_stream_50_reports_keep_2(tmp_path: Path) -> None:
    lines = list(events(50, 2, 0.3, runs=2))
    assert any(b"validation_result" in line for line in lines)  # the stream exercises validations
    theirs, ray_deleted = ray_fold(lines, tmp_path)
    mine, evicted = ckptlog_fold(lines)
    assert theirs == mine
    assert sorted(ray_deleted) == sorted(evicted)
    assert len(evicted) > 20  # retention really ran


def _event(eid: str, kind: str, data: dict[str, object]) -> bytes:
    body = {"specversion": "1.0", "id": eid, "source": "t", "type": f"ckptlog.{kind}.v1", "subject": "r", "data": data}
    return json.dumps(body).encode()


def tricky(seed: int) -> list[bytes]:
    """Ties, min order, failed and timed-out validations, results out of order."""
    rng = random.Random(seed)
    config = {"num_to_keep": rng.choice([1, 2, 3, None]), "checkpoint_score_attribute": "val/acc"}
    config["checkpoint_score_order"] = rng.choice(["max", "min"])
    lines, pending = [_event("s", "run_started", {"storage_path": "file:///b/r", "checkpoint_config": config})], []
    for i in range(40):
        path, validate = f"file:///b/r/c{i:04d}", rng.random() < 0.4
        metrics = {"val": {"acc": rng.choice([0.1, 0.2, 1, 2])}}
        lines.append(
            _event(f"r{i}", "report", {"metrics": metrics, "checkpoint": {"path": path}, "validation": validate})
        )
        pending += [path] if validate else []
        if pending and rng.random() < 0.5:
            done = pending.pop(rng.randrange(len(pending)))
            status = rng.choice(["VALIDATED", "VALIDATED", "VALIDATION_FAILED", "VALIDATION_TIMEOUT"])
            result = {"checkpoint_path": done, "status": status, "metrics": {"val": {"acc": rng.choice([0.2, 5])}}}
            lines.append(_event(f"v{i}", "validation_result", result))
    return lines


@pytest.mark.parametrize("seed", range(12))
def test_ties_orders_and_statuses_agree(tmp_path: Path, seed: int) -> None:
    lines = tricky(seed)
    assert ray_fold(lines, tmp_path)[0] == ckptlog_fold(lines)[0]


def test_state_is_written_only_when_persisting(tmp_path: Path) -> None:
    lines = list(events(5, 2, 0.0, runs=1))
    ray_fold(lines, tmp_path / "on", persist=True)
    ray_fold(lines, tmp_path / "off", persist=False)
    assert list((tmp_path / "on").rglob("checkpoint_manager_snapshot.json"))
    assert not list((tmp_path / "off").rglob("checkpoint_manager_snapshot.json"))


def test_rays_deletion_function_is_restored(tmp_path: Path) -> None:
    from ray.train.v2._internal.execution.checkpoint import checkpoint_manager

    original = vars(checkpoint_manager)["delete_fs_path"]
    with RayRuns(tmp_path, persist=False):
        assert vars(checkpoint_manager)["delete_fs_path"] is not original
    assert vars(checkpoint_manager)["delete_fs_path"] is original
