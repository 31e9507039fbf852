"""The training loops tests/integration/test_trainers.py runs: per framework, a tiny seeded model on CPU
whose logged score zigzags with the epoch (plus a tiny real loss term), so the best checkpoints are
neither the first nor the last. Each loop takes the framework's checkpoint callback (or manager),
ckptlog's or the framework's own, and a `hook(epoch)` called before that epoch's save."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "torch")  # before Keras is imported; torch is here for the others anyway
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")  # JAX: 1 thread

ZIGZAG = [0.1, 0.3, 0.2, 0.8, 0.4, 0.5, 0.3, 0.9, 0.6, 0.85, 0.2, 0.4]
"""The score of epoch (or step) i: top 2 of the first nine are 3 and 7, of all twelve 7 and 9."""


def one_thread() -> None:
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)


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
