"""The trainer integrations' mapping of each framework's own settings onto ckptlog's, without Kafka and
without training: the real framework classes, a pinned VIEW where an answer comes from ckptlog (the
trainings against a real broker are tests/integration/test_trainers.py)."""

from __future__ import annotations

import concurrent.futures
import datetime
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ckptlog.client.views import RunView
from ckptlog.integrations.inflight import InFlight
from ckptlog.integrations.metrics import plain_metrics
from ckptlog.integrations.session import split_options

os.environ.setdefault("KERAS_BACKEND", "torch")


def pinned_view(root: Path, scores: dict[int, float], latest: int) -> RunView:
    """A VIEW keeping epoch e's checkpoint with score scores[e] (best last), latest `latest`."""
    ranked = sorted(scores, key=scores.__getitem__)
    checkpoints = [
        {
            "path": f"{root}/epoch={e}.ckpt",
            "metrics": {"val_acc": scores[e], "epoch": e},
            "status": "COMMITTED",
            "report_index": e,
        }
        for e in ranked
    ]
    return RunView.model_validate(
        {
            "checkpoints": checkpoints,
            "latest": f"{root}/epoch={latest}.ckpt",
            "best": checkpoints[-1]["path"],
            "committed": latest + 1,
            "validated": latest + 1,
            "generation": 0,
            "index_in_generation": latest + 1,
        }
    )


def test_metrics_become_json_numbers_and_what_has_no_number_is_left_out() -> None:
    import jax.numpy as jnp
    import torch

    metrics = {
        "loss": torch.tensor(0.5),
        "acc": torch.tensor([0.25]),
        "np": np.float32(2.0),
        "jax": jnp.asarray(3.0),
        "steps": np.int64(7),
        "name": "run",
        "flag": True,
        "weights": torch.ones(3),
        "none": None,
        "val": {"f1": torch.tensor(1.0), "matrix": np.ones((2, 2))},
        4: 1,
    }
    assert plain_metrics(metrics) == {
        "loss": 0.5,
        "acc": 0.25,
        "np": 2.0,
        "jax": 3.0,
        "steps": 7,
        "name": "run",
        "flag": True,
        "val": {"f1": 1.0},
        "4": 1,
    }


def test_split_options_takes_ckptlogs_keywords_and_leaves_the_frameworks() -> None:
    kwargs = {"monitor": "val_loss", "keep_every_n_steps": 5, "retry_interval_s": 1.0, "save_top_k": 3}
    assert split_options(kwargs) == {"keep_every_n_steps": 5, "retry_interval_s": 1.0}
    assert kwargs == {"monitor": "val_loss", "save_top_k": 3}


# -- Lightning -------------------------------------------------------------------------------------


def test_lightning_answers_best_and_top_k_from_the_view(tmp_path: Path) -> None:
    from ckptlog.integrations.lightning import CkptlogModelCheckpoint

    checkpoint = CkptlogModelCheckpoint(dirpath=tmp_path, monitor="val_acc", mode="max", save_top_k=2, run_id="r")
    checkpoint.kept.pin(pinned_view(tmp_path, {0: 0.1, 3: 0.8, 7: 0.9, 8: 0.6}, latest=8))
    assert checkpoint.best_model_path == f"{tmp_path}/epoch=7.ckpt"
    assert float(checkpoint.best_model_score) == pytest.approx(0.9)  # type: ignore[arg-type]
    assert {k: round(float(v), 3) for k, v in checkpoint.best_k_models.items()} == {
        f"{tmp_path}/epoch=7.ckpt": 0.9,
        f"{tmp_path}/epoch=3.ckpt": 0.8,
    }  # the latest (epoch 8) is kept, but not among the top 2
    assert checkpoint.kth_best_model_path == f"{tmp_path}/epoch=3.ckpt"
    assert float(checkpoint.kth_value) == pytest.approx(0.8)
    (tmp_path / "epoch=8.ckpt").write_bytes(b"x")
    assert checkpoint._find_last_checkpoints(None) == {f"{tmp_path}/epoch=8.ckpt"}  # type: ignore[arg-type]
    assert checkpoint.state_dict()["best_model_path"] == f"{tmp_path}/epoch=7.ckpt"


def test_lightning_without_a_view_keeps_lightnings_own_values_and_fewer_than_k_have_no_kth(tmp_path: Path) -> None:
    from ckptlog.integrations.lightning import CkptlogModelCheckpoint

    checkpoint = CkptlogModelCheckpoint(dirpath=tmp_path, monitor="val_acc", mode="max", save_top_k=3, run_id="r")
    checkpoint.kept.pin(None)
    checkpoint.load_state_dict({"best_model_path": "/x/epoch=1.ckpt", "best_model_score": None, "dirpath": "/other"})
    assert checkpoint.best_model_path == "/x/epoch=1.ckpt" and checkpoint.best_k_models == {}
    checkpoint.kept.pin(pinned_view(tmp_path, {0: 0.1, 1: 0.2}, latest=1))
    assert checkpoint.kth_best_model_path == "" and float(checkpoint.kth_value) == float("-inf")
    assert len(checkpoint.best_k_models) == 2


def test_lightning_without_monitor_has_no_top_k_and_refuses_save_top_k_0(tmp_path: Path) -> None:
    from ckptlog.integrations.lightning import CkptlogModelCheckpoint

    checkpoint = CkptlogModelCheckpoint(dirpath=tmp_path, run_id="r")  # Lightning: the newest one
    checkpoint.kept.pin(pinned_view(tmp_path, {4: 0.0}, latest=4))
    assert checkpoint.best_model_path == f"{tmp_path}/epoch=4.ckpt" and checkpoint.best_k_models == {}
    with pytest.raises(ValueError, match=r"save_top_k=0.*ModelCheckpoint"):
        CkptlogModelCheckpoint(dirpath=tmp_path, save_top_k=0, run_id="r")
    with pytest.raises(TypeError, match="keep_every_n_step"):
        CkptlogModelCheckpoint(dirpath=tmp_path, run_id="r", keep_every_n_step=5)  # misspelt: Lightning refuses it


# -- Hugging Face ------------------------------------------------------------------------------------


def test_transformers_score_attribute_is_the_trainers_metric_name(tmp_path: Path) -> None:
    from transformers import TrainingArguments

    from ckptlog.integrations.transformers import score_attribute

    args = TrainingArguments(output_dir=str(tmp_path), metric_for_best_model="accuracy", report_to=[])
    assert score_attribute(args) == "eval_accuracy" and args.greater_is_better
    args = TrainingArguments(output_dir=str(tmp_path), metric_for_best_model="eval_loss", report_to=[])
    assert score_attribute(args) == "eval_loss" and not args.greater_is_better
    assert score_attribute(TrainingArguments(output_dir=str(tmp_path), report_to=[])) is None


def test_transformers_refuses_save_total_limit_before_training(tmp_path: Path) -> None:
    import torch
    from transformers import Trainer, TrainingArguments

    from ckptlog.integrations.transformers import CkptlogCallback

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
            return {"loss": torch.nn.functional.mse_loss(self.layer(x), labels)}

    callback = CkptlogCallback("refused", num_to_keep=2)
    args = TrainingArguments(output_dir=str(tmp_path), save_total_limit=2, report_to=[], use_cpu=True, max_steps=2)
    data = [{"x": torch.ones(2), "labels": torch.ones(1)}] * 4
    trainer = Trainer(Tiny(), args, train_dataset=data, callbacks=[callback])
    with pytest.raises(ValueError, match=r"save_total_limit=2.*two rotations.*CkptlogCallback\(num_to_keep=2\)"):
        trainer.train()
    assert not callback.ckptlog.started and not list(tmp_path.glob("checkpoint-*"))


# -- Keras -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filepath", "root"),
    [
        ("/mnt/run/epoch-{epoch:03d}.keras", "/mnt/run"),
        ("/mnt/run/{epoch}/model.keras", "/mnt/run"),
        ("/mnt/run/e{epoch}-b{batch}-{val_loss:.2f}.weights.h5", "/mnt/run"),
        ("gs://bucket/run/epoch-{epoch}.keras", "gs://bucket/run"),
        ("epoch-{epoch}.keras", os.getcwd()),
        ("ckpts/epoch-{epoch}.keras", os.path.join(os.getcwd(), "ckpts")),
    ],
)
def test_keras_root_is_the_directory_before_the_first_placeholder(filepath: str, root: str) -> None:
    from ckptlog.integrations.keras import root_of

    assert root_of(filepath) == root


@pytest.mark.parametrize(
    "filepath", ["/mnt/run/model.keras", "/mnt/run/best-{val_loss:.2f}.keras", "/mnt/{epochs}.keras"]
)
def test_keras_refuses_a_filepath_without_epoch_or_batch(filepath: str) -> None:
    from ckptlog.integrations.keras import CkptlogModelCheckpoint

    with pytest.raises(ValueError, match=r"would overwrite one file.*\{epoch\}"):
        CkptlogModelCheckpoint(filepath, run_id="one-file")


def test_keras_save_best_only_keeps_the_best_by_default() -> None:
    from ckptlog.integrations.keras import CkptlogModelCheckpoint

    assert CkptlogModelCheckpoint("/r/{epoch}.keras", run_id="a", save_best_only=True).num_to_keep == 1
    assert CkptlogModelCheckpoint("/r/{epoch}.keras", run_id="a", save_best_only=True, num_to_keep=3).num_to_keep == 3
    assert CkptlogModelCheckpoint("/r/{epoch}.keras", run_id="a").num_to_keep is None


# -- Orbax -------------------------------------------------------------------------------------------


def test_orbax_options_become_ckptlogs_retention() -> None:
    import orbax.checkpoint as ocp

    from ckptlog.integrations.orbax import mapped_retention

    options = ocp.CheckpointManagerOptions(
        max_to_keep=3,
        best_fn=lambda m: m["loss"],
        best_mode="min",
        keep_period=100,
        keep_time_interval=datetime.timedelta(hours=1),
    )
    assert mapped_retention(options, None) == {
        "num_to_keep": 3,
        "checkpoint_score_attribute": "best_fn",
        "checkpoint_score_order": "min",
        "keep_every_n_steps": 100,
        "step_attribute": "step",
        "keep_time_interval_s": 3600.0,
    }
    assert mapped_retention(options, "val/loss")["checkpoint_score_attribute"] == "val/loss"
    newest = mapped_retention(ocp.CheckpointManagerOptions(max_to_keep=2), None)
    assert newest == {"num_to_keep": 2, "checkpoint_score_attribute": None, "checkpoint_score_order": "max"}
    policy = ocp.checkpoint_managers.LatestN(n=2)
    with pytest.raises(ValueError, match="preservation_policy"):
        mapped_retention(ocp.CheckpointManagerOptions(preservation_policy=policy), None)


# -- plain PyTorch -----------------------------------------------------------------------------------


class Recording:
    """A started TrainerRun that records its reports."""

    started = True

    def __init__(self) -> None:
        self.reports: list[tuple[str, dict[str, Any]]] = []

    def report(self, metrics: dict[str, Any], path: str) -> None:
        self.reports.append((path, metrics))

    def close(self, finished: bool = True) -> None:
        self.closed = finished


def test_async_saves_are_reported_once_complete_and_in_save_order() -> None:
    run = Recording()
    inflight = InFlight(run)
    first, second = concurrent.futures.Future[None](), concurrent.futures.Future[None]()
    inflight.add("/r/0", {"loss": np.float64(1.0)}, first)
    inflight.add("/r/1", {"loss": 0.5}, second)
    second.set_result(None)
    inflight.poll()
    assert run.reports == []  # step 1 is complete, but step 0 is not: nothing yet, never out of order
    first.set_result(None)
    inflight.add("/r/2.pt", {"loss": 0.2})  # complete when given (torch.save)
    assert run.reports == [("/r/0", {"loss": 1.0}), ("/r/1", {"loss": 0.5}), ("/r/2.pt", {"loss": 0.2})]


def test_torch_a_failed_async_save_raises_at_close_and_is_never_reported() -> None:
    from ckptlog.integrations.torch import CkptlogCheckpoints

    checkpoints = CkptlogCheckpoints("r", "/r")
    run = Recording()
    checkpoints.ckptlog, checkpoints.inflight = run, InFlight(run)  # type: ignore[assignment]

    class Response:  # dcp's AsyncSaveResponse: upload_completion is what counts
        staging_completion = concurrent.futures.Future[None]()
        upload_completion = concurrent.futures.Future[None]()

    response = Response()
    response.staging_completion.set_result(None)
    checkpoints.saved("/r/0", {}, future=response)
    assert run.reports == []
    response.upload_completion.set_exception(OSError("disk full"))
    with pytest.raises(OSError, match="disk full"):
        checkpoints.close()
    assert run.reports == [] and run.closed is True


def test_lightning_async_checkpoint_io_is_written_only_once_its_thread_saved(tmp_path: Path) -> None:
    import threading
    from types import SimpleNamespace

    from lightning.pytorch.plugins.io import AsyncCheckpointIO, TorchCheckpointIO

    from ckptlog.integrations.lightning import written

    release = threading.Event()

    class Slow(TorchCheckpointIO):
        def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
            release.wait(120)
            super().save_checkpoint(checkpoint, path, storage_options)

    io = AsyncCheckpointIO(Slow())
    trainer = SimpleNamespace(strategy=SimpleNamespace(checkpoint_io=io))
    io.save_checkpoint({"step": 1}, tmp_path / "epoch=1.ckpt")
    future = written(trainer)  # type: ignore[arg-type]
    assert future is not None and not future.done()
    release.set()
    future.result(timeout=120)  # a loaded CI host once took over 10 s (torch.save imports lazily)
    assert (tmp_path / "epoch=1.ckpt").is_file()
    io._error = OSError("disk full")  # a save failed in the thread: the next written() fails with it
    failed = written(trainer)  # type: ignore[arg-type]
    with pytest.raises(OSError, match="disk full"):
        failed.result(timeout=120)  # type: ignore[union-attr]
    io._error = None
    io.teardown()
    assert written(SimpleNamespace(strategy=SimpleNamespace(checkpoint_io=Slow()))) is None  # type: ignore[arg-type]
