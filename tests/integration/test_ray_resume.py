"""A resumed Ray run, in both documented setups (issue 21 item 3): two real Ray jobs under one
`RunConfig.name` and storage path, the second resuming from Ray's snapshot, each reporting 3
checkpoints through `CkptlogCallback`; ckptlog must hold every report of both jobs.

- ckptlog keeps everything (the callback's `num_to_keep=None`) while Ray deletes (its own
  `num_to_keep=2`); the first job fails after its third report (a failed run is not finished);
- the recommended setup: Ray keeps everything, ckptlog deletes (`num_to_keep=2`); the first job
  succeeds with `finish=False`, ckptlog deletes what it evicted, and the second job must still
  start (Ray's snapshot lists the deleted checkpoints: ckptlog/integrations/ray_snapshot.py);
- a run whose first job succeeded and finished it in ckptlog (`finish=True`, the default) is
  reopened by the second job, which goes on training it (issue 38 item 6): both jobs' reports, the
  kept set across them, the run finished again in its next epoch;
- once its finished record has expired (`--finished-runs-kept`), the second job fails at the
  controller's start with `RunNotResumable`, before it trains.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.1")

import ray.train
from ray.train import Checkpoint, CheckpointConfig, RunConfig, ScalingConfig
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

from ckptlog.integrations.ray import CkptlogCallback, kept_checkpoints
from ckptlog.kafka import read_topic
from ckptlog.kafka.producers import produce
from ckptlog.processor.service.harness import event_record, running
from ckptlog.processor.service.settings import ServiceSettings
from tests import factories as f
from tests.integration.test_processor_e2e import conn_of, make_settings
from tests.integration.test_ray_train import callback_topics, disk_settles, ray_cluster, view_of

pytestmark = pytest.mark.timeout(300)
__all__ = ["ray_cluster"]  # the module-scoped Ray of test_ray_train, shared
PER_JOB = 3
LOSSES = [0.5, 0.9, 0.7, 0.3, 0.8, 0.6]  # by step: the best are neither the first nor the newest


def train_fn(config: dict[str, Any]) -> None:
    """Three reports from where Ray's checkpoint says; with `fail_after`, fail once that many are in."""
    start, resumed = 0, ray.train.get_checkpoint()
    if resumed is not None:
        with resumed.as_directory() as directory:
            start = json.loads((Path(directory) / "state.json").read_text())["step"] + 1
    for step in range(start, start + PER_JOB):
        with tempfile.TemporaryDirectory() as directory:
            (Path(directory) / "state.json").write_text(json.dumps({"step": step}))
            ray.train.report({"loss": LOSSES[step], "step": step}, checkpoint=Checkpoint.from_directory(directory))
    if config.get("fail"):
        raise RuntimeError("the first job dies after its reports")


def fit(
    settings: ServiceSettings, storage: Path, *, ray_keep: int | None, keep: int | None, **callback: Any
) -> BaseException | None:
    """Run one job; what failed it (Ray raises it from `fit`), or None."""
    trainer = DataParallelTrainer(
        train_fn,
        train_loop_config={"fail": callback.pop("fail", False)},
        scaling_config=ScalingConfig(num_workers=1),
        run_config=RunConfig(
            name="resumed",
            storage_path=str(storage),
            checkpoint_config=CheckpointConfig(
                num_to_keep=ray_keep, checkpoint_score_attribute="loss", checkpoint_score_order="min"
            ),
            callbacks=[
                CkptlogCallback(
                    num_to_keep=keep,
                    **callback_topics(settings),
                    **callback,
                )
            ],
        ),
    )
    try:
        return trainer.fit().error
    except Exception as exc:
        return exc


async def outputs_of(settings: ServiceSettings, kind: str) -> list[dict[str, Any]]:
    records = await read_topic(conn_of(settings), settings.checkpoints_topic)
    return [o["data"] for o in (json.loads(r.value or b"{}") for r in records) if o["type"] == kind]


async def rejections(settings: ServiceSettings) -> list[dict[str, Any]]:
    return [json.loads(r.value or b"{}") for r in await read_topic(conn_of(settings), settings.dlq_topic)]


async def both_jobs(tmp_path: Path, topic_factory: Any, kafka_bootstrap: str, **overrides: Any) -> ServiceSettings:
    root = (tmp_path / "ray").as_uri()
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, storage_root=root, **overrides)
    (tmp_path / "ray").mkdir(exist_ok=True)
    return settings


async def test_ckptlog_keeps_everything_ray_deletes_and_a_failed_job_is_resumed(
    ray_cluster: None, topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await both_jobs(tmp_path, topic_factory, kafka_bootstrap)
    async with running(settings):
        first = await asyncio.to_thread(fit, settings, tmp_path / "ray", ray_keep=2, keep=None, fail=True)
        await view_of(settings, "resumed", PER_JOB)
        second = await asyncio.to_thread(fit, settings, tmp_path / "ray", ray_keep=2, keep=None)
        view = await view_of(settings, "resumed", 2 * PER_JOB)
        registered = await outputs_of(settings, "ckptlog.checkpoint_registered.v1")
        started = await outputs_of(settings, "ckptlog.worker_group_started.v1")
        dlq = await rejections(settings)
    assert first is not None and second is None, second
    paths = [r["checkpoint_path"] for r in registered]
    assert len(paths) == 2 * PER_JOB == len(set(paths)), "every report of both jobs, each once"
    assert view["committed"] == 2 * PER_JOB and view["generation"] == 1
    assert [s["generation"] for s in started] == [1]  # the second job went on as a new worker group
    assert started[0]["latest_checkpoint_path"] == paths[PER_JOB - 1]  # ... from the first job's last one
    assert [c["path"] for c in view["checkpoints"]] == sorted(paths, key=lambda p: -LOSSES[paths.index(p)])
    assert dlq == []


async def test_recommended_setup_ckptlog_deletes_and_ray_still_resumes(
    ray_cluster: None, topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await both_jobs(tmp_path, topic_factory, kafka_bootstrap)
    run_dir = tmp_path / "ray" / "resumed"
    async with running(settings):
        first = await asyncio.to_thread(fit, settings, tmp_path / "ray", ray_keep=None, keep=2, finish=False)
        view = await view_of(settings, "resumed", PER_JOB)
        kept_first = {c["path"] for c in view["checkpoints"]}
        assert await disk_settles(run_dir, kept_first) == kept_first  # ckptlog deleted its eviction
        second = await asyncio.to_thread(fit, settings, tmp_path / "ray", ray_keep=None, keep=2, finish=False)
        view = await view_of(settings, "resumed", 2 * PER_JOB)
        kept = [c["path"] for c in view["checkpoints"]]
        on_disk = await disk_settles(run_dir, set(kept))
        registered = await outputs_of(settings, "ckptlog.checkpoint_registered.v1")
        as_ray = await asyncio.to_thread(
            kept_checkpoints, "resumed", bootstrap_servers=settings.bootstrap_servers, state_topic=settings.state_topic
        )
        dlq = await rejections(settings)
    assert first is None and second is None, second
    paths = [r["checkpoint_path"] for r in registered]
    assert len(paths) == 2 * PER_JOB == len(set(paths))
    loss = {p: LOSSES[i] for i, p in enumerate(paths)}
    top = sorted(paths, key=lambda p: loss[p])[:2]
    assert set(kept) == {*top, paths[-1]} and view["latest"] == paths[-1] and view["generation"] == 1
    assert on_disk == set(kept), "only ckptlog's kept set is left on disk"
    assert [c.path for c in as_ray] == kept and all(isinstance(c, Checkpoint) for c in as_ray)
    assert dlq == []


async def test_a_run_its_first_job_finished_is_reopened_by_the_next_job_and_goes_on(
    ray_cluster: None, topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Issue 38 item 6: Ray resumes a run under the same RunConfig.name and storage path after its
    first job succeeded; the callback had finished it in ckptlog then. The second job reopens it and
    trains on: ckptlog's kept set spans both jobs, and ckptlog deletes what it evicts after the
    reopen (the finished run's retired claim is gone from its root)."""
    settings = await both_jobs(tmp_path, topic_factory, kafka_bootstrap)
    run_dir = tmp_path / "ray" / "resumed"
    async with running(settings):
        first = await asyncio.to_thread(fit, settings, tmp_path / "ray", ray_keep=None, keep=2)  # finish=True
        view = await view_of(settings, "resumed", PER_JOB, finished=True)
        assert view.get("finished") is True and "reopened" not in view
        kept_first = {c["path"] for c in view["checkpoints"]}
        assert await disk_settles(run_dir, kept_first) == kept_first
        second = await asyncio.to_thread(fit, settings, tmp_path / "ray", ray_keep=None, keep=2)
        view = await view_of(settings, "resumed", 2 * PER_JOB, finished=True)
        kept = [c["path"] for c in view["checkpoints"]]
        on_disk = await disk_settles(run_dir, set(kept))
        registered = await outputs_of(settings, "ckptlog.checkpoint_registered.v1")
        started = await outputs_of(settings, "ckptlog.worker_group_started.v1")
        dlq = await rejections(settings)
    assert first is None and second is None, second
    paths = [r["checkpoint_path"] for r in registered]
    assert len(paths) == 2 * PER_JOB == len(set(paths)), "every report of both jobs, each once"
    loss = {p: LOSSES[i] for i, p in enumerate(paths)}
    top = sorted(paths, key=lambda p: loss[p])[:2]
    assert set(kept) == {*top, paths[-1]} and view["latest"] == paths[-1]
    assert view["committed"] == 2 * PER_JOB and view["generation"] == 1  # went on as a new worker group
    assert [s["generation"] for s in started] == [1] and started[0]["latest_checkpoint_path"] == paths[PER_JOB - 1]
    assert view["reopened"] == 1 and view["finished"] is True  # the second job finished it again
    assert on_disk == set(kept), "ckptlog deleted what it evicted after the reopen"
    assert dlq == []


async def test_a_run_whose_finished_record_expired_is_not_resumed(
    ray_cluster: None, topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """After `--finished-runs-kept` later retirements the fold no longer knows the run: a reopen
    could take the old run's late events for a new run's, so the second job is refused, clearly,
    before it trains (contract §3 *Expiry*)."""
    settings = await both_jobs(tmp_path, topic_factory, kafka_bootstrap, finished_runs_kept=1)
    conn = conn_of(settings)
    async with running(settings):
        first = await asyncio.to_thread(fit, settings, tmp_path / "ray", ray_keep=None, keep=2)
        await view_of(settings, "resumed", PER_JOB)
        other = (tmp_path / "ray" / "other").as_uri()  # another run retires: the first one's record expires
        await produce(
            conn, [event_record(settings.input_topic, e) for e in (f.started("other", other), f.finished("other"))]
        )
        error = await asyncio.to_thread(fit, settings, tmp_path / "ray", ray_keep=None, keep=2)
        view = await view_of(settings, "resumed", PER_JOB)
        dlq = [dict(r.headers) for r in await read_topic(conn, settings.dlq_topic)]
    assert first is None, first
    assert isinstance(error, Exception) and "has finished" in str(error) and "RunConfig.name" in str(error), error
    assert "unknown_run" in str(error) and "--finished-runs-kept" in str(error), error
    assert view["committed"] == PER_JOB and view.get("finished") is True  # nothing of the second job
    assert [d["__ckptlog.errors.reason"] for d in dlq] == [b"unknown_run"]


async def test_adopt_ray_puts_a_ray_run_under_ckptlog_once(
    ray_cluster: None, topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Issue 21 item 7: a run Ray alone wrote (Ray deleting, keep 2) is adopted by `ckptlog adopt-ray`
    from its experiment directory; ckptlog then holds Ray's checkpoints and a second adopt sends nothing."""
    from typer.testing import CliRunner

    from ckptlog.cli.main import _register, app

    _register()
    settings = await both_jobs(tmp_path, topic_factory, kafka_bootstrap)
    trainer = DataParallelTrainer(
        train_fn,
        train_loop_config={},
        scaling_config=ScalingConfig(num_workers=1),
        run_config=RunConfig(
            name="ray-only",
            storage_path=str(tmp_path / "ray"),
            checkpoint_config=CheckpointConfig(
                num_to_keep=2, checkpoint_score_attribute="loss", checkpoint_score_order="min"
            ),
        ),
    )
    result = await asyncio.to_thread(trainer.fit)
    ray_kept = {c.path for c, _ in result.best_checkpoints}
    env = {
        "CKPTLOG_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "CKPTLOG_INPUT_TOPIC": settings.input_topic,
        "CKPTLOG_STATE_TOPIC": settings.state_topic,
        "CKPTLOG_DLQ_TOPIC": settings.dlq_topic,
        "CKPTLOG_GROUP_ID": settings.group_id,
    }
    args = ["adopt-ray", str(tmp_path / "ray" / "ray-only"), "--score-attribute", "loss", "--score-order", "min"]

    def adopt() -> Any:
        outcome = CliRunner().invoke(app, [*args, "--confirm"], env=env)
        assert outcome.exit_code == 0, outcome.output
        return outcome

    async with running(settings):
        first = await asyncio.to_thread(adopt)
        view = await view_of(settings, "ray-only", len(ray_kept))
        second = await asyncio.to_thread(adopt)
        records = await read_topic(conn_of(settings), settings.input_topic)
        dlq = await rejections(settings)
    assert len(first.stdout.split()) == 1 + len(ray_kept)  # run_started, one report per checkpoint Ray has
    assert {c["path"] for c in view["checkpoints"]} == ray_kept and view["latest"] == result.checkpoint.path
    assert second.stdout == "" and "nothing sent" in second.stderr
    assert len(records) == 1 + len(ray_kept) and dlq == []
