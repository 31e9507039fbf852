"""Lightning (`lightning.pytorch`) → ckptlog: a `ModelCheckpoint` whose retention is ckptlog's.

    from ckptlog.integrations.lightning import CkptlogModelCheckpoint

    checkpoint = CkptlogModelCheckpoint(dirpath="/mnt/ckpts/run-1", monitor="val_loss", mode="min",
                                        save_top_k=3, run_id="run-1", bootstrap_servers="kafka:9092")
    trainer = Trainer(callbacks=[checkpoint])

It takes ModelCheckpoint's arguments, plus `run_id`, `connection=`/`bootstrap_servers=` and the keyword
arguments of `TrainerRun` (ckptlog/integrations/session.py: topics, outbox bounds, `finish`, and
ckptlog's rules beyond Lightning's, e.g. `keep_every_n_steps`). What changes:

- **ckptlog decides what stays.** `save_top_k`, `monitor` and `mode` become the run's `num_to_keep`,
  score attribute and order (`save_top_k=-1`: keep every one). Lightning writes a checkpoint at
  every trigger it would consider (not only those that enter its top k) and deletes none; each file
  is reported once Lightning has written it (with `AsyncCheckpointIO`, once its thread has: at a
  later save or at the end of `fit`), from the global-zero process, and ckptlog deletes what it
  evicts. ckptlog also keeps the latest checkpoint, which Lightning drops when it does not rank: one
  INFO line says so at the start. Lightning's own `last` file (`save_last`) stays Lightning's.
- **Lightning asks ckptlog.** `best_model_path`, `best_model_score`, `best_k_models`,
  `kth_best_model_path` and `kth_value` answer from the run's VIEW (ckptlog/integrations/kept.py),
  so do `trainer.validate(ckpt_path="best")` and `ckpt_path="last"` (the VIEW's latest).
- **A resumed fit goes on with the same run**: `trainer.fit(model, ckpt_path="last")` under the same
  `run_id` and `dirpath` loads the VIEW's latest and reports as the run's next worker group.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ckptlog.client.connect import Connection
from ckptlog.client.views import ReportedCheckpoint, RunView
from ckptlog.integrations.inflight import InFlight
from ckptlog.integrations.kept import Kept, retention_note, score
from ckptlog.integrations.session import TrainerRun, local_path, split_options, top

try:
    import torch
    from lightning.pytorch import LightningModule, Trainer
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.plugins.io import AsyncCheckpointIO
    from lightning.pytorch.utilities import rank_zero_info
except ImportError as exc:  # pragma: no cover - exercised only without Lightning
    raise ImportError("ckptlog.integrations.lightning needs Lightning 2: pip install 'ckptlog[lightning]'") from exc

__all__ = ["CkptlogModelCheckpoint"]
log = logging.getLogger(__name__)


def written(trainer: Trainer) -> concurrent.futures.Future[None] | None:
    """With `AsyncCheckpointIO`, a future that completes once the save just submitted has (its one
    worker saves in order) and fails if a save failed; None when the save is complete already."""
    io = trainer.strategy.checkpoint_io
    executor = getattr(io, "_executor", None) if isinstance(io, AsyncCheckpointIO) else None
    return executor.submit(_raise_save_error, io) if executor is not None else None


def _raise_save_error(io: AsyncCheckpointIO) -> None:
    if io._error is not None:
        raise io._error


class CkptlogModelCheckpoint(ModelCheckpoint):
    """See the module docstring."""

    def __init__(
        self,
        *args: Any,
        run_id: str,
        bootstrap_servers: str | None = None,
        connection: Connection | None = None,
        **kwargs: Any,
    ) -> None:
        options = split_options(kwargs)
        self.ckptlog = TrainerRun(
            run_id, "lightning", bootstrap_servers=bootstrap_servers, connection=connection, **options
        )
        self.kept = Kept(self.ckptlog)
        self._lightning: dict[str, Any] = {}  # what Lightning set of the attributes answered from the VIEW
        self._cached_only = False
        self._reported: set[str] = set()
        self.inflight = InFlight(self.ckptlog)
        super().__init__(*args, **kwargs)
        if self.save_top_k == 0:
            raise ValueError(
                "CkptlogModelCheckpoint(save_top_k=0) saves no checkpoint for ckptlog to manage: use Lightning's "
                "ModelCheckpoint, or give save_top_k the number to keep (-1: all)"
            )

    # -- the run ----------------------------------------------------------------------------------

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        if stage != "fit":
            return
        self.kept.unpin()
        if trainer.is_global_zero:
            assert self.dirpath is not None
            root = str(self.dirpath)
            root = root if "://" in root else os.path.abspath(root)
            num_to_keep = self.save_top_k if self.save_top_k > 0 else None
            retention = {"num_to_keep": num_to_keep, "checkpoint_score_attribute": self.monitor}
            self.ckptlog.start(root, {**retention, "checkpoint_score_order": self.mode}, trainer.world_size)
            retention_note(self.ckptlog, f"Lightning's save_top_k={self.save_top_k}", num_to_keep, self.monitor)

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Send what waits, then hand every process the run's final VIEW."""
        view: RunView | None = None
        if self.ckptlog.started:
            try:
                self.inflight.wait()
            finally:
                self.ckptlog.close()
            view = self.kept.view()
        self.kept.pin(trainer.strategy.broadcast(view))

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        super().on_exception(trainer, pl_module, exception)
        self._abandon()

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        super().teardown(trainer, pl_module, stage)
        self._abandon()
        self.kept.close()

    def _abandon(self) -> None:
        """Training stopped early: send what waits, leave the run open (a resumed fit goes on with it)."""
        if self.ckptlog.started:
            try:
                try:
                    self.inflight.wait()
                finally:
                    self.ckptlog.close(finished=False)
            except Exception:  # the training's own exception is the one to see; this one is logged
                log.exception("event=lightning_reports_undelivered run=%r", self.ckptlog.run_id)

    # -- saving: every candidate, reported; removal is ckptlog's ------------------------------------

    def _save_monitor_checkpoint(self, trainer: Trainer, monitor_candidates: dict[str, torch.Tensor]) -> None:
        assert self.monitor is not None
        current = monitor_candidates.get(self.monitor)
        if current is None:
            return
        self.current_score = current
        filepath = self._get_metric_interpolated_filepath_name(monitor_candidates, trainer)
        if self.verbose:
            rank_zero_info(f"{self.monitor!r} is {float(current):0.5f}: saving {filepath!r} (ckptlog keeps it or not)")
        self._save_checkpoint(trainer, filepath)

    def _save_none_monitor_checkpoint(self, trainer: Trainer, monitor_candidates: dict[str, torch.Tensor]) -> None:
        self._save_checkpoint(trainer, self._get_metric_interpolated_filepath_name(monitor_candidates, trainer))

    def _save_checkpoint(self, trainer: Trainer, filepath: str) -> None:
        super()._save_checkpoint(trainer, filepath)
        if filepath != self.last_model_path and self.ckptlog.started:  # Lightning's `last` copy is its own
            self.inflight.add(filepath, self._monitor_candidates(trainer), written(trainer))
            self._reported.add(filepath)

    def _remove_checkpoint(self, trainer: Trainer, filepath: str) -> None:
        """Lightning removes only its own stale `last` copies here; a reported checkpoint is ckptlog's to delete."""
        if filepath not in self._reported:
            super()._remove_checkpoint(trainer, filepath)

    def _find_last_checkpoints(self, trainer: Trainer) -> set[str]:
        """`ckpt_path="last"`: the VIEW's latest (Lightning's own `last` files for a run ckptlog does not know)."""
        latest = self.kept.latest_path()
        return {latest} if latest is not None else super()._find_last_checkpoints(trainer)

    def state_dict(self) -> dict[str, Any]:
        """Lightning's state, with the VIEW as last read (a save never waits for the processor)."""
        with self._cached():
            return super().state_dict()

    @contextmanager
    def _cached(self) -> Iterator[None]:
        self._cached_only = True
        try:
            yield
        finally:
            self._cached_only = False

    # -- what Lightning reads: from the VIEW ---------------------------------------------------------

    def _view(self) -> RunView | None:
        return self.kept.cached() if self._cached_only else self.kept.view()

    def _top(self, view: RunView) -> list[ReportedCheckpoint]:
        return top(view, self.save_top_k) if self.monitor is not None else []

    def _tensor(self, checkpoint: ReportedCheckpoint | None) -> torch.Tensor | None:
        value = score(checkpoint, self.monitor) if checkpoint is not None else None
        return torch.tensor(value) if value is not None else None

    @property
    def best_model_path(self) -> str:
        view = self._view()
        if view is None:
            return str(self._lightning.get("best_model_path", ""))
        return local_path(view.best) if view.best is not None else ""

    @best_model_path.setter
    def best_model_path(self, value: str) -> None:
        self._lightning["best_model_path"] = value

    @property
    def best_model_score(self) -> torch.Tensor | None:
        view = self._view()
        if view is None:
            return self._lightning.get("best_model_score")
        return self._tensor(next((c for c in view.checkpoints if c.path == view.best), None))

    @best_model_score.setter
    def best_model_score(self, value: torch.Tensor | None) -> None:
        self._lightning["best_model_score"] = value

    @property
    def best_k_models(self) -> dict[str, torch.Tensor]:
        view = self._view()
        if view is None:
            return dict(self._lightning.get("best_k_models", {}))
        ranked = ((local_path(c.path), self._tensor(c)) for c in self._top(view))
        return {path: value for path, value in ranked if value is not None}

    @best_k_models.setter
    def best_k_models(self, value: dict[str, torch.Tensor]) -> None:
        self._lightning["best_k_models"] = value

    @property
    def kth_best_model_path(self) -> str:
        view = self._view()
        if view is None:
            return str(self._lightning.get("kth_best_model_path", ""))
        top = self._top(view)
        return local_path(top[-1].path) if top and len(top) == self.save_top_k else ""

    @kth_best_model_path.setter
    def kth_best_model_path(self, value: str) -> None:
        self._lightning["kth_best_model_path"] = value

    @property
    def kth_value(self) -> torch.Tensor:
        view = self._view()
        top = self._top(view) if view is not None else []
        kth = self._tensor(top[-1]) if top and len(top) == self.save_top_k else None
        if kth is not None:
            return kth
        unset = torch.tensor(torch.inf if self.mode == "min" else -torch.inf)
        return self._lightning.get("kth_value", unset) if view is None else unset

    @kth_value.setter
    def kth_value(self, value: torch.Tensor) -> None:
        self._lightning["kth_value"] = value
