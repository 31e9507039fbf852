"""Every trainer integration against its real framework (issue 37): Lightning, Hugging Face, PyTorch
(torch.save and DCP), Keras and Orbax, each training a tiny seeded model on CPU.

One broker of this module's own (real Apache Kafka jars) and a processor on it (`ckptlog run`, in
process): each framework's run is taken through a Kafka outage from a hook of the training itself
(Lightning: the broker stopped and started again; the others: paused with SIGSTOP and resumed, which
costs no JVM restart), so its outbox must deliver every report late and in order. Per framework the
test trains the same run with the framework's own retention and with ckptlog's (the loops are
tests/integration/trainer_loops.py) and checks the files left on disk and the run's VIEW: ckptlog keeps
what the framework keeps plus the latest, its best is the framework's best, every report arrived; then
a second job resumes the run and goes on with it (the next generation, the same run). At the end of
the module each framework's kept files, alone and with ckptlog, are printed (`-s` shows them).
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
from tests.integration.trainer_loops import keras_fit, lightning_fit, orbax_train, torch_train, transformers_train

pytestmark = pytest.mark.timeout(300)
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


# -- Lightning -------------------------------------------------------------------------------------


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
