"""ckptlog beside a real Ray Train job (issue 15): Ray 2.x from PyPI, a v2 DataParallelTrainer on
CPU with a plain Python training function, the processor on the real broker.

Ray keeps every checkpoint (`num_to_keep=None`) and ckptlog owns retention and deletion through
`ckptlog.integrations.ray.CkptlogCallback`; afterwards ckptlog's view must be what Ray's own
manager reports (its best checkpoints by the same score, its latest), the evicted checkpoint
directories gone from disk and the kept ones there. A second run loses a worker once
(`FailureConfig(max_failures=1)`): the new worker group is generation 1, and it resumes from the
checkpoint ckptlog's `worker_group_started` names.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.1")  # else every report waits on a 2 s poll

import ray
import ray.train
from ray.train import Checkpoint, CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

from ckptlog.integrations.ray import CkptlogCallback
from ckptlog.kafka import read_topic
from ckptlog.processor.service.harness import running
from ckptlog.processor.service.settings import ServiceSettings
from ckptlog.processor.service.views import read_views
from tests.integration.test_processor_e2e import conn_of, make_settings

pytestmark = pytest.mark.timeout(300)
REPORTS, KEEP = 24, 3


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def train_fn(config: dict[str, Any]) -> None:
    """Reports with checkpoints; a lower loss later on, so the best are not simply the newest;
    every 5th asks for validation. With `fail_at`, the first attempt dies there once."""
    start, resumed = 0, ray.train.get_checkpoint()
    if resumed is not None:
        with resumed.as_directory() as directory:
            start = json.loads((Path(directory) / "state.json").read_text())["step"] + 1
        Path(config["resumed_file"]).write_text(json.dumps({"path": resumed.path, "start": start}))
    for step in range(start, config["reports"]):
        if step == config.get("fail_at") and not Path(config["failed_once"]).exists():
            Path(config["failed_once"]).write_text("x")
            raise RuntimeError("a worker dies once")
        with tempfile.TemporaryDirectory() as directory:
            (Path(directory) / "state.json").write_text(json.dumps({"step": step}))
            loss = (step * 7) % 11 + step / 100
            validation = step % 5 == 0
            ray.train.report(
                {"loss": loss, "step": step}, checkpoint=Checkpoint.from_directory(directory), validation=validation
            )


def validate_fn(checkpoint: Checkpoint, **kwargs: Any) -> dict[str, Any]:
    with checkpoint.as_directory() as directory:
        step = json.loads((Path(directory) / "state.json").read_text())["step"]
    return {"val_loss": step / 10}


def callback_topics(settings: ServiceSettings) -> dict[str, Any]:
    """The CkptlogCallback arguments that point it at this test's broker, topics and processor group."""
    return {
        "bootstrap_servers": settings.bootstrap_servers,
        "topic": settings.input_topic,
        "state_topic": settings.state_topic,
        "dlq_topic": settings.dlq_topic,
        "checkpoints_topic": settings.checkpoints_topic,
        "processor_group": settings.group_id,
    }


def fit(settings: ServiceSettings, storage: Path, name: str, config: dict[str, Any], **failure: Any) -> Any:
    callback = CkptlogCallback(
        num_to_keep=KEEP,
        checkpoint_score_attribute="loss",
        checkpoint_score_order="min",
        **callback_topics(settings),
    )
    trainer = DataParallelTrainer(
        train_fn,
        train_loop_config=config,
        scaling_config=ScalingConfig(num_workers=1),
        validation_config=ray.train.ValidationConfig(fn=validate_fn),
        run_config=RunConfig(
            name=name,
            storage_path=str(storage),
            checkpoint_config=CheckpointConfig(
                num_to_keep=None, checkpoint_score_attribute="loss", checkpoint_score_order="min"
            ),
            failure_config=FailureConfig(**failure),
            callbacks=[callback],
        ),
    )
    return trainer.fit()


async def view_of(
    settings: ServiceSettings, run_id: str, reports: int, timeout_s: float = 60.0, finished: bool = False
) -> dict[str, Any]:
    """The run's VIEW once every report and validation is in (and, with `finished`, the run's finish:
    it is folded in a batch of its own after the last report's, so a VIEW may show every report first)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        view = (await read_views(conn_of(settings), settings.state_topic, [run_id])).get(run_id)
        done = view is not None and view["committed"] >= reports and view["validated"] >= reports
        if done and (not finished or view.get("finished") is True):
            assert view is not None
            return view
        assert asyncio.get_running_loop().time() < deadline, f"the view never caught up: {view}"
        await asyncio.sleep(0.5)


async def disk_settles(directory: Path, expected: set[str], timeout_s: float = 60.0) -> set[str]:
    """The checkpoint directories on disk, once they are `expected` (or at the timeout): the
    processor deletes in the background after each commit, so the last evictions may lag the view."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        on_disk = {p.parent.as_posix() for p in directory.glob("*/state.json")}
        if on_disk == expected or asyncio.get_running_loop().time() > deadline:
            return on_disk
        await asyncio.sleep(0.2)


async def test_ckptlog_keeps_what_ray_ranks_best_and_deletes_the_rest(
    ray_cluster: None, topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, storage_root=(tmp_path / "ray").as_uri())
    (tmp_path / "ray").mkdir(exist_ok=True)
    async with running(settings):
        result = await asyncio.to_thread(fit, settings, tmp_path / "ray", "job", {"reports": REPORTS})
        view = await view_of(settings, "job", REPORTS)
        kept = [c["path"] for c in view["checkpoints"]]
        on_disk = await disk_settles(tmp_path / "ray" / "job", set(kept))  # deletions run after each commit
    assert len(result.best_checkpoints) == REPORTS  # Ray kept every one: ckptlog owns deletion
    loss = {checkpoint.path: metrics["loss"] for checkpoint, metrics in result.best_checkpoints}
    ray_order = sorted(loss, key=lambda path: -loss[path])  # Ray's rank under "min": worst first, best last
    latest = result.checkpoint.path
    expected = sorted({*ray_order[-KEEP:], latest}, key=lambda path: -loss[path])  # top-K, plus the latest
    assert kept == expected and view["latest"] == latest and view["best"] == ray_order[-1]
    validated = [c for c in view["checkpoints"] if c["status"] == "VALIDATED"]
    assert all("val_loss" in c["metrics"] for c in validated)
    outputs = [json.loads(r.value or b"{}") for r in await read_topic(conn_of(settings), settings.checkpoints_topic)]
    results = [o["data"] for o in outputs if o["type"] == "ckptlog.checkpoint_status_changed.v1"]
    assert len(results) == len(range(0, REPORTS, 5)) and {r["status"] for r in results} == {"VALIDATED"}
    assert all(r["metrics"]["val_loss"] == r["metrics"]["step"] / 10 for r in results)  # Ray's own results
    assert on_disk == set(kept), "evicted checkpoints must be gone and kept ones there"


async def test_a_failed_worker_group_is_replaced_and_resumes_from_ckptlogs_latest(
    ray_cluster: None, topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, storage_root=(tmp_path / "ray").as_uri())
    (tmp_path / "ray").mkdir(exist_ok=True)
    config = {
        "reports": 12,
        "fail_at": 7,
        "failed_once": str(tmp_path / "failed"),
        "resumed_file": str(tmp_path / "resumed.json"),
    }
    async with running(settings):
        result = await asyncio.to_thread(fit, settings, tmp_path / "ray", "flaky", config, max_failures=1)
        view = await view_of(settings, "flaky", 12)
        outputs = [
            json.loads(r.value or b"{}") for r in await read_topic(conn_of(settings), settings.checkpoints_topic)
        ]
    assert result.error is None
    resumed = json.loads((tmp_path / "resumed.json").read_text())
    started = [o["data"] for o in outputs if o["type"] == "ckptlog.worker_group_started.v1" and o["subject"] == "flaky"]
    assert [s["generation"] for s in started] == [1] and view["generation"] == 1
    assert started[0]["latest_checkpoint_path"] == resumed["path"]  # what the new workers resumed from
    assert started[0]["report_count"] == 7 and resumed["start"] == 7
