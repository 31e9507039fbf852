"""Every trainer integration against its real framework (issue 37): Lightning, Hugging Face, PyTorch
(torch.save and DCP), Keras and Orbax, each training a tiny seeded model on CPU.

One broker of this module's own (real Apache Kafka jars) and a processor on it (`ckptlog run`, in
process): each framework's run is taken through a Kafka outage (the broker stopped and started again
mid-training, from a callback of the training itself), so its outbox must deliver every report late
and in order. Per framework the test trains the same run twice, once with the framework's own
retention and once with ckptlog's, and checks the files left on disk and the run's VIEW: ckptlog keeps
what the framework keeps plus the latest, its best is the framework's best, every report arrived; then
a second job resumes the run and goes on with it (the next generation, the same run).

The scores the models log zigzag with the epoch (plus a tiny real loss term), so the best checkpoints
are neither the first nor the last. `KEPT` prints each framework's kept files, with and without ckptlog.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ckptlog import ConnectionSettings
from ckptlog.broker import LocalBroker
from ckptlog.broker.config import free_port
from ckptlog.client.connect import Topics
from ckptlog.client.reader import AsyncReader
from ckptlog.client.views import RunView
from ckptlog.errors import CkptlogError
from ckptlog.integrations.session import local_path
from ckptlog.processor.service.harness import running
from ckptlog.processor.service.settings import load_settings

os.environ.setdefault("KERAS_BACKEND", "torch")  # before Keras is imported; torch is here for the others anyway
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")  # JAX: 1 thread
pytestmark = pytest.mark.timeout(300)
ZIGZAG = [0.1, 0.3, 0.2, 0.8, 0.4, 0.5, 0.3, 0.9, 0.6, 0.85, 0.2, 0.4]
"""The score of epoch (or step) i: top 2 of the first nine are 3 and 7, of all twelve 7 and 9."""
FIRST, RESUMED, KEEP = 9, 12, 2


@dataclass
class Kafka:
    """The module's broker, which a test may take down and bring back, and the processor's topics."""

    broker: LocalBroker
    bootstrap: str
    storage: Path

    def options(self, **extra: Any) -> dict[str, Any]:
        """The integration keywords for this broker: a short delivery timeout and retry interval, so an
        outage costs seconds; the processor's VIEW awaited for up to two minutes (it recovers too)."""
        return {
            "connection": ConnectionSettings(bootstrap_servers=self.bootstrap, delivery_timeout_s=2.0),
            "retry_interval_s": 0.5,
            "resume_timeout_s": 120.0,
            **extra,
        }

    def down(self, how: str) -> None:
        """`stop`: the broker is gone (connections refused); `pause`: it hangs (SIGSTOP: connections
        accepted, nothing answered), which costs no JVM restart."""
        if how == "pause":
            os.kill(self.pid(), signal.SIGSTOP)
        else:
            self.broker.stop()

    def up(self, how: str) -> None:
        if how == "pause":
            os.kill(self.pid(), signal.SIGCONT)
        else:
            assert self.broker.start() == self.bootstrap

    def pid(self) -> int:
        state = self.broker.read_state()
        assert state is not None and state.pid is not None
        return state.pid

    async def view(self, run_id: str, committed: int, timeout_s: float = 120.0) -> RunView:
        """The run's VIEW once it counts `committed` reports."""
        async with AsyncReader(bootstrap_servers=self.bootstrap, topics=Topics()) as reader:
            result = await reader.wait_for(run_id, committed, "committed", timeout_s)
        assert result.reached and result.view is not None, f"{run_id}: the VIEW never counted {committed}: {result}"
        return result.view


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalBroker, str]]:
    broker = LocalBroker(tmp_path_factory.mktemp("trainers-broker"), free_port())
    try:
        bootstrap = broker.start()
    except CkptlogError as exc:
        pytest.fail(f"could not start a local broker: {exc}")
    try:
        yield broker, bootstrap
    finally:
        state = broker.read_state()
        if state is not None and state.pid is not None:
            try:
                os.kill(state.pid, signal.SIGCONT)  # a test that failed with the broker paused
            except ProcessLookupError:
                pass
        broker.stop()


@pytest.fixture(scope="module")
async def kafka(broker: tuple[LocalBroker, str], tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Kafka]:
    """The processor on the module's broker (default topic names: the broker is this module's)."""
    work = tmp_path_factory.mktemp("trainers")
    (work / "runs").mkdir()
    settings = load_settings(
        None,
        bootstrap_servers=broker[1],
        snapshots=str(work / "snapshots"),
        storage_root=(work / "runs").as_uri(),
        poll_timeout_ms=50,
    )
    async with running(settings, ready_timeout_s=60):
        yield Kafka(broker[0], broker[1], work / "runs")


def run_dir(kafka: Kafka, name: str) -> Path:
    return kafka.storage / f"{name}-{uuid.uuid4().hex[:6]}"


def outage(kafka: Kafka, at: int, until: int, how: str = "pause") -> Callable[[int], None]:
    """A hook for the training loop: Kafka goes down (`how`: Kafka.down) before epoch `at` is saved,
    comes back before `until`."""

    def hook(epoch: int) -> None:
        if epoch == at:
            kafka.down(how)
        elif epoch == until:
            kafka.up(how)

    return hook


async def settled(paths: set[str], pattern: str, root: Path, timeout_s: float = 60.0) -> set[str]:
    """The checkpoints matching `pattern` under `root`, once they are `paths` (the processor deletes
    after each commit, in the background), or at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = {p.as_posix() for p in root.glob(pattern)}
        if found == paths or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.2)


def kept_paths(view: RunView) -> set[str]:
    return {local_path(c.path) for c in view.checkpoints}


KEPT: dict[str, tuple[list[str], list[str]]] = {}


def record(framework: str, alone: set[str], with_ckptlog: set[str]) -> None:
    """Note a framework's kept files (names) without and with ckptlog; printed at the end of the module."""
    KEPT[framework] = (sorted(Path(p).name for p in alone), sorted(Path(p).name for p in with_ckptlog))


@pytest.fixture(scope="module", autouse=True)
def print_kept() -> Iterator[None]:
    yield
    for framework, (alone, with_ckptlog) in KEPT.items():
        print(f"\n{framework}: alone {alone} -> with ckptlog {with_ckptlog}")


def one_thread() -> None:
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)


# -- Lightning -------------------------------------------------------------------------------------


def lightning_fit(
    dirpath: Path, epochs: int, checkpoint: Any, hook: Callable[[int], None] | None = None, **fit: Any
) -> Any:
    import lightning.pytorch as pl
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    one_thread()

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: Any, index: int) -> Any:
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def validation_step(self, batch: Any, index: int) -> None:
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.log("val_score", ZIGZAG[self.current_epoch] - loss.detach() * 1e-6)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.05)

    class Outage(pl.Callback):
        def on_validation_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
            if hook is not None and not trainer.sanity_checking:
                hook(trainer.current_epoch)

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=generator)
    data = TensorDataset(x, x.sum(dim=1, keepdim=True))
    trainer = pl.Trainer(
        max_epochs=epochs,
        callbacks=[Outage(), checkpoint],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        accelerator="cpu",
        default_root_dir=str(dirpath),
    )
    model = Tiny()
    validation = DataLoader(data, batch_size=32)
    trainer.fit(model, DataLoader(data, batch_size=8), validation, **fit)
    return trainer, model, validation


async def test_lightning(kafka: Kafka, tmp_path: Path) -> None:
    from lightning.pytorch.callbacks import ModelCheckpoint

    from ckptlog.integrations.lightning import CkptlogModelCheckpoint

    args = {"monitor": "val_score", "mode": "max", "save_top_k": KEEP}
    alone = ModelCheckpoint(dirpath=tmp_path / "alone", **args)
    await asyncio.to_thread(lightning_fit, tmp_path / "alone", FIRST, alone)
    lightning_kept = {p.as_posix() for p in (tmp_path / "alone").glob("*.ckpt")}

    root = run_dir(kafka, "lightning")
    checkpoint = CkptlogModelCheckpoint(dirpath=root, run_id=root.name, **args, **kafka.options())
    trainer, model, validation = await asyncio.to_thread(
        lightning_fit, root, FIRST, checkpoint, outage(kafka, 3, 6, "stop")
    )
    view = await kafka.view(root.name, FIRST)
    renamed = {(root / Path(p).name).as_posix() for p in lightning_kept}
    latest = (root / f"epoch={FIRST - 1}-step={4 * FIRST}.ckpt").as_posix()
    assert view.committed == FIRST and local_path(view.latest or "") == latest  # no report lost in the outage
    assert kept_paths(view) == renamed | {latest}
    assert local_path(view.best or "") == (root / Path(alone.best_model_path).name).as_posix()
    assert checkpoint.best_model_path == local_path(view.best or "")
    assert set(checkpoint.best_k_models) == {(root / Path(p).name).as_posix() for p in alone.best_k_models}
    assert float(checkpoint.best_model_score) == pytest.approx(float(alone.best_model_score))
    on_disk = await settled(kept_paths(view), "*.ckpt", root)
    assert on_disk == kept_paths(view)
    record("Lightning (top 2 by val_score, 9 epochs)", lightning_kept, on_disk)

    await asyncio.to_thread(trainer.validate, model, validation, ckpt_path="best", verbose=False)
    assert trainer.ckpt_path == checkpoint.best_model_path

    again = CkptlogModelCheckpoint(dirpath=root, run_id=root.name, **args, **kafka.options())
    resumed, _, _ = await asyncio.to_thread(lightning_fit, root, RESUMED, again, ckpt_path="last")
    assert resumed.ckpt_path == latest  # the VIEW's latest
    view = await kafka.view(root.name, RESUMED)
    assert view.generation == 1 and view.committed == RESUMED
    scores = {local_path(c.path): c.metrics["val_score"] for c in view.checkpoints}
    expected = {(root / f"epoch={e}-step={4 * (e + 1)}.ckpt").as_posix() for e in (7, 9, RESUMED - 1)}
    assert kept_paths(view) == expected, scores
    assert await settled(expected, "*.ckpt", root) == expected


# -- Hugging Face Trainer ------------------------------------------------------------------------------


def transformers_train(
    output_dir: Path, epochs: int, callbacks: list[Any], save_total_limit: int | None = None, **train: Any
) -> Any:
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    one_thread()

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
            out = self.layer(x)
            return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}

    class Hook(TrainerCallback):  # before CkptlogCallback's on_save: the outage begins before a save
        def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if hook is not None:
                hook(round(state.epoch) - 1)

    hook = train.pop("hook", None)
    trainers: list[Trainer] = []

    def score(prediction: Any) -> dict[str, float]:
        loss = float(((prediction.predictions - prediction.label_ids) ** 2).mean())
        return {"score": ZIGZAG[round(trainers[0].state.epoch) - 1] - loss * 1e-6}

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=generator)
    data = [{"x": row, "labels": row.sum(dim=0, keepdim=True)} for row in x]
    args = TrainingArguments(
        output_dir=str(output_dir),
        num_train_epochs=epochs,
        per_device_train_batch_size=8,
        per_device_eval_batch_size=32,
        eval_strategy="epoch",
        save_strategy="epoch",
        logging_strategy="no",
        metric_for_best_model="score",
        load_best_model_at_end=True,
        save_total_limit=save_total_limit,
        report_to=[],
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        learning_rate=0.05,
    )
    trainer = Trainer(Tiny(), args, train_dataset=data, eval_dataset=data, compute_metrics=score)
    trainers.append(trainer)
    trainer.add_callback(Hook())
    for callback in callbacks:
        trainer.add_callback(callback)
    trainer.train(**train)
    return trainer


async def test_transformers(kafka: Kafka, tmp_path: Path) -> None:
    from ckptlog.integrations.transformers import CkptlogCallback

    alone = await asyncio.to_thread(transformers_train, tmp_path / "alone", FIRST, [], save_total_limit=KEEP)
    trainer_kept = {p.as_posix() for p in (tmp_path / "alone").glob("checkpoint-*")}

    root = run_dir(kafka, "transformers")
    callback = CkptlogCallback(root.name, num_to_keep=KEEP, **kafka.options())
    trainer = await asyncio.to_thread(transformers_train, root, FIRST, [callback], hook=outage(kafka, 3, 6))
    view = await kafka.view(root.name, FIRST)
    scores = {
        (root / f"checkpoint-{e['step']}").as_posix(): e["eval_score"]
        for e in trainer.state.log_history
        if "eval_score" in e
    }
    top = sorted(scores, key=scores.__getitem__)[-KEEP:]
    latest = (root / f"checkpoint-{4 * FIRST}").as_posix()
    assert view.committed == FIRST and local_path(view.latest or "") == latest
    assert kept_paths(view) == {*top, latest}, "the top 2 by the Trainer's own metric, and the latest"
    assert local_path(view.best or "") == trainer.state.best_model_checkpoint == top[-1]
    assert Path(alone.state.best_model_checkpoint).name == Path(top[-1]).name  # the Trainer alone: the same best
    assert callback.kept.best_path() == top[-1]
    on_disk = await settled(kept_paths(view), "checkpoint-*", root)
    assert on_disk == kept_paths(view)
    record(
        "Hugging Face (save_total_limit=2 alone; num_to_keep=2 by eval_score with ckptlog, 9 epochs)",
        trainer_kept,
        on_disk,
    )

    again = CkptlogCallback(root.name, num_to_keep=KEEP, **kafka.options())
    resumed = await asyncio.to_thread(transformers_train, root, RESUMED, [again], resume_from_checkpoint=True)
    view = await kafka.view(root.name, RESUMED)
    assert view.generation == 1 and view.committed == RESUMED
    expected = {(root / f"checkpoint-{4 * (e + 1)}").as_posix() for e in (7, 9, RESUMED - 1)}
    assert kept_paths(view) == expected
    assert resumed.state.best_model_checkpoint == local_path(view.best or "") == (root / "checkpoint-32").as_posix()
    assert await settled(expected, "checkpoint-*", root) == expected


# -- plain PyTorch: torch.save and torch.distributed.checkpoint -------------------------------------------


def torch_train(root: Path, steps: int, checkpoints: Any, how: str, hook: Callable[[int], None] | None = None) -> int:
    """A hand-written loop: `how` is "save" (torch.save, one file per step) or "dcp" (dcp.async_save, one
    directory per step, reported when its future completes); resumes from the VIEW's latest. Returns the
    step it started at."""
    import torch
    import torch.distributed.checkpoint as dcp

    one_thread()
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    start, latest = 0, checkpoints.kept.latest_path() if checkpoints is not None else None
    if latest is not None:
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": 0}
        if how == "dcp":
            dcp.load(state, checkpoint_id=latest)
        else:
            state = torch.load(latest)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = int(state["step"]) + 1
    for step in range(start, steps):
        loss = torch.nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if hook is not None:
            hook(step)
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
        metrics = {"val_score": ZIGZAG[step] - loss.detach() * 1e-6, "step": step}
        path = str(root / (f"step-{step}" if how == "dcp" else f"step-{step}.pt"))
        if how == "dcp":
            future = dcp.async_save(state, checkpoint_id=path)
            if checkpoints is not None:
                checkpoints.saved(path, metrics, future=future)
            else:
                future.result()
        else:
            root.mkdir(parents=True, exist_ok=True)
            torch.save(state, path)
            if checkpoints is not None:
                checkpoints.saved(path, metrics)
    return start


@pytest.mark.parametrize("how", ["dcp", "save"])
async def test_torch(kafka: Kafka, tmp_path: Path, how: str) -> None:
    from ckptlog.integrations.torch import CkptlogCheckpoints

    pattern = "step-*"
    await asyncio.to_thread(torch_train, tmp_path / "alone", FIRST, None, how)
    alone = {p.as_posix() for p in (tmp_path / "alone").glob(pattern)}
    assert len(alone) == FIRST  # a loop keeps every checkpoint it writes

    root = run_dir(kafka, f"torch-{how}")
    args = {"num_to_keep": KEEP, "checkpoint_score_attribute": "val_score", **kafka.options()}
    name = (lambda step: root / f"step-{step}") if how == "dcp" else (lambda step: root / f"step-{step}.pt")

    def job(steps: int, hook: Callable[[int], None] | None = None) -> int:
        with CkptlogCheckpoints(root.name, str(root), **args) as checkpoints:
            return torch_train(root, steps, checkpoints, how, hook)

    started = await asyncio.to_thread(job, FIRST, outage(kafka, 3, 6) if how == "dcp" else None)
    view = await kafka.view(root.name, FIRST)
    assert started == 0 and view.committed == FIRST and local_path(view.latest or "") == name(FIRST - 1).as_posix()
    assert kept_paths(view) == {name(e).as_posix() for e in (3, 7, FIRST - 1)}  # the top 2 by val_score, the latest
    assert local_path(view.best or "") == name(7).as_posix()
    on_disk = await settled(kept_paths(view), pattern, root)
    assert on_disk == kept_paths(view)
    record(
        f"PyTorch {'dcp.async_save' if how == 'dcp' else 'torch.save'} (9 steps; num_to_keep=2 by val_score)",
        alone,
        on_disk,
    )

    started = await asyncio.to_thread(job, RESUMED)
    view = await kafka.view(root.name, RESUMED)
    assert started == FIRST and view.generation == 1 and view.committed == RESUMED
    expected = {name(e).as_posix() for e in (7, 9, RESUMED - 1)}
    assert kept_paths(view) == expected
    assert await settled(expected, pattern, root) == expected


# -- Keras -----------------------------------------------------------------------------------------------


def keras_fit(filepath: Path, epochs: int, checkpoint: Any, hook: Callable[[int], None] | None = None) -> Any:
    """Fit (or, with a checkpoint that has a latest, go on from it) a tiny model; the score zigzags by epoch."""
    import keras
    import numpy as np

    one_thread()
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    latest = checkpoint.kept.latest_path() if hasattr(checkpoint, "kept") else None
    if latest is not None:
        model = keras.models.load_model(latest)
        initial = int(Path(latest).stem.split("-")[1])
    else:
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
        initial = 0

    def score(epoch: int, logs: dict[str, Any]) -> None:
        if hook is not None:
            hook(epoch)
        logs["val_score"] = ZIGZAG[epoch] - logs["val_loss"] * 1e-6

    callbacks = [keras.callbacks.LambdaCallback(on_epoch_end=score), checkpoint]
    model.fit(
        x, y, batch_size=8, epochs=epochs, initial_epoch=initial, validation_data=(x, y), callbacks=callbacks, verbose=0
    )
    return model


async def test_keras(kafka: Kafka, tmp_path: Path) -> None:
    import keras

    from ckptlog.integrations.keras import CkptlogModelCheckpoint

    args = {"monitor": "val_score", "mode": "max", "save_best_only": True}
    alone = keras.callbacks.ModelCheckpoint(str(tmp_path / "alone" / "epoch-{epoch:02d}.keras"), **args)
    await asyncio.to_thread(keras_fit, tmp_path / "alone", FIRST, alone)
    keras_kept = sorted(p.as_posix() for p in (tmp_path / "alone").glob("*.keras"))
    assert [Path(p).stem for p in keras_kept] == ["epoch-01", "epoch-02", "epoch-04", "epoch-08"]  # each improvement

    root = run_dir(kafka, "keras")
    filepath = str(root / "epoch-{epoch:02d}.keras")
    checkpoint = CkptlogModelCheckpoint(filepath, run_id=root.name, **args, **kafka.options())
    await asyncio.to_thread(keras_fit, root, FIRST, checkpoint, outage(kafka, 3, 6))
    view = await kafka.view(root.name, FIRST)
    best, latest = (root / Path(keras_kept[-1]).name).as_posix(), (root / f"epoch-{FIRST:02d}.keras").as_posix()
    assert view.committed == FIRST and local_path(view.latest or "") == latest
    assert kept_paths(view) == {best, latest}  # Keras's best (num_to_keep=1 under save_best_only), the latest
    assert local_path(view.best or "") == best == checkpoint.kept.best_path()
    on_disk = await settled(kept_paths(view), "*.keras", root)
    assert on_disk == kept_paths(view)
    record("Keras (save_best_only by val_score; num_to_keep=1 with ckptlog, 9 epochs)", set(keras_kept), on_disk)

    again = CkptlogModelCheckpoint(filepath, run_id=root.name, **args, **kafka.options())
    await asyncio.to_thread(keras_fit, root, RESUMED, again)
    view = await kafka.view(root.name, RESUMED)
    assert view.generation == 1 and view.committed == RESUMED
    expected = {best, (root / f"epoch-{RESUMED:02d}.keras").as_posix()}
    assert kept_paths(view) == expected
    assert await settled(expected, "*.keras", root) == expected


# -- JAX / Orbax -----------------------------------------------------------------------------------------


def orbax_train(root: Path, steps: int, manager: Any, hook: Callable[[int], None] | None = None) -> int:
    """Train a tiny linear model with JAX, saving every step (async, Orbax's default); resume from the
    manager's latest step. Returns the step it started at."""
    import jax
    import jax.numpy as jnp
    import orbax.checkpoint as ocp

    x = jax.random.normal(jax.random.PRNGKey(0), (32, 4))
    y = x.sum(axis=1, keepdims=True)
    params, start = {"w": jnp.zeros((4, 1)), "b": jnp.zeros((1,))}, 0

    def loss_of(params: dict[str, Any]) -> Any:
        return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)

    latest = manager.latest_step()
    if latest is not None:
        params, start = manager.restore(latest, args=ocp.args.StandardRestore(params)), latest + 1
    with manager:
        for step in range(start, steps):
            loss, grads = jax.value_and_grad(loss_of)(params)
            params = jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)
            if hook is not None:
                hook(step)
            metrics = {"val_score": ZIGZAG[step] - float(loss) * 1e-6}
            manager.save(step, args=ocp.args.StandardSave(params), metrics=metrics)
    return start


async def test_orbax(kafka: Kafka, tmp_path: Path) -> None:
    import orbax.checkpoint as ocp

    from ckptlog.integrations.orbax import CkptlogCheckpointManager

    def options(keep: int | None) -> Any:
        return ocp.CheckpointManagerOptions(max_to_keep=keep, best_fn=lambda m: m["val_score"], best_mode="max")

    await asyncio.to_thread(
        orbax_train, tmp_path / "all", FIRST, ocp.CheckpointManager(tmp_path / "all", options=options(None))
    )
    keep_all = {p.as_posix() for p in (tmp_path / "all").iterdir() if p.name.isdigit()}
    assert len(keep_all) == FIRST
    await asyncio.to_thread(
        orbax_train, tmp_path / "top", FIRST, ocp.CheckpointManager(tmp_path / "top", options=options(KEEP))
    )
    orbax_kept = {p.name for p in (tmp_path / "top").iterdir() if p.name.isdigit()}

    root = run_dir(kafka, "orbax")
    manager = CkptlogCheckpointManager(root, options=options(KEEP), run_id=root.name, **kafka.options())
    await asyncio.to_thread(orbax_train, root, FIRST, manager, outage(kafka, 3, 6))
    view = await kafka.view(root.name, FIRST)
    latest = (root / str(FIRST - 1)).as_posix()
    assert view.committed == FIRST and local_path(view.latest or "") == latest
    assert kept_paths(view) == {(root / name).as_posix() for name in orbax_kept} | {
        latest
    }  # Orbax's top 2 (best_fn), the latest
    assert local_path(view.best or "") == (root / str(manager.best_step())).as_posix() == manager.kept.best_path()
    on_disk = await settled(kept_paths(view), "[0-9]*", root)
    assert on_disk == kept_paths(view)
    record(
        "Orbax (best_fn val_score, 9 steps; alone with max_to_keep=None, with ckptlog max_to_keep=2)", keep_all, on_disk
    )
    record("Orbax alone with max_to_keep=2 (its own top 2)", orbax_kept, on_disk)

    again = CkptlogCheckpointManager(root, options=options(KEEP), run_id=root.name, **kafka.options())
    started = await asyncio.to_thread(orbax_train, root, RESUMED, again)
    view = await kafka.view(root.name, RESUMED)
    assert started == FIRST and view.generation == 1 and view.committed == RESUMED
    expected = {(root / str(step)).as_posix() for step in (7, 9, RESUMED - 1)}
    assert kept_paths(view) == expected
    assert await settled(expected, "[0-9]*", root) == expected
