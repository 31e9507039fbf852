"""Keras 3 (any backend) → ckptlog: a `ModelCheckpoint` whose retention is ckptlog's.

    from ckptlog.integrations.keras import CkptlogModelCheckpoint

    checkpoint = CkptlogModelCheckpoint("/mnt/ckpts/run-1/epoch-{epoch:03d}.keras", monitor="val_loss",
                                        save_best_only=True, run_id="run-1", num_to_keep=3)
    model.fit(x, y, validation_data=..., epochs=100, callbacks=[checkpoint])

It takes ModelCheckpoint's arguments, plus `run_id`, `num_to_keep`, `connection=`/`bootstrap_servers=`
and the keyword arguments of `TrainerRun` (ckptlog/integrations/session.py).

- **Every save a new file, reported.** `filepath` must name each checkpoint apart (`{epoch}` or
  `{batch}` in it; a fixed name would be overwritten in place, and ckptlog refuses a path reported
  twice). The run's root is the directory part of `filepath` before its first placeholder. The
  callback saves at every `save_freq` and reports the file once Keras wrote it, with the logs, the
  epoch and the batch; only process 0 reports.
- **Retention.** `monitor` and `mode` (`auto` resolved as Keras resolves it) become the score and its
  order. `save_best_only=True` keeps `num_to_keep` (default 1) best by it instead of writing only
  improvements; without it ckptlog keeps every checkpoint unless `num_to_keep` is given. ckptlog also
  keeps the latest, which `save_best_only` never writes unless it improves (one INFO line says so).
- **Resume.** `checkpoint.kept.latest_path()` is the run's latest: `keras.models.load_model` it, then
  `model.fit(..., initial_epoch=N)` under the same run id goes on with the same run.
"""

from __future__ import annotations

import logging
import os
import string
from typing import Any

from ckptlog.client.connect import Connection
from ckptlog.integrations.kept import Kept, retention_note
from ckptlog.integrations.metrics import plain_metrics
from ckptlog.integrations.session import TrainerRun, split_options

try:
    import keras
except ImportError as exc:  # pragma: no cover - exercised only without Keras
    raise ImportError("ckptlog.integrations.keras needs Keras 3: pip install 'ckptlog[keras]'") from exc

__all__ = ["CkptlogModelCheckpoint", "root_of"]
log = logging.getLogger(__name__)


def root_of(filepath: str) -> str:
    """The directory a `filepath` template writes below: its directory part before the first placeholder.
    A template without `{epoch}` or `{batch}` is refused (every save would overwrite the last one)."""
    fields = {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(filepath) if name}
    if not fields & {"epoch", "batch"}:
        raise ValueError(
            f"CkptlogModelCheckpoint(filepath={filepath!r}) would overwrite one file: ckptlog needs each "
            "checkpoint at its own path, so put {epoch} (or {batch}) in filepath, e.g. 'ckpts/epoch-{epoch:03d}.keras'"
        )
    prefix = filepath.split("{", 1)[0]
    directory = prefix.rsplit("/", 1)[0] if "/" in prefix else "."
    return directory if "://" in directory else os.path.abspath(directory)


def process_index() -> int:
    """This process's index among the training's processes (0 without distribution)."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return int(jax.process_index())
    if backend == "torch":
        import torch.distributed as dist

        return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    return 0


class CkptlogModelCheckpoint(keras.callbacks.ModelCheckpoint):  # type: ignore[misc]
    """See the module docstring."""

    def __init__(
        self,
        *args: Any,
        run_id: str,
        num_to_keep: int | None = None,
        bootstrap_servers: str | None = None,
        connection: Connection | None = None,
        **kwargs: Any,
    ) -> None:
        options = split_options(kwargs)
        super().__init__(*args, **kwargs)
        self.root = root_of(self.filepath)
        self.num_to_keep = num_to_keep if num_to_keep is not None or not self.save_best_only else 1
        self.ckptlog = TrainerRun(
            run_id, "keras", bootstrap_servers=bootstrap_servers, connection=connection, **options
        )
        self.kept = Kept(self.ckptlog)

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        super().on_train_begin(logs)
        self.kept.unpin()

    def _start(self) -> None:
        """At the first save, once Keras knows the monitor's direction (`mode="auto"` needs the metrics)."""
        if self.monitor_op is None:
            self._set_monitor_op()
        order = "max" if bool(self.monitor_op(1.0, 0.0)) else "min"
        retention = {"num_to_keep": self.num_to_keep, "checkpoint_score_attribute": self.monitor}
        self.ckptlog.start(self.root, {**retention, "checkpoint_score_order": order})
        rule = "Keras's save_best_only" if self.save_best_only else "Keras (which keeps every file)"
        retention_note(self.ckptlog, rule, self.num_to_keep, self.monitor)

    def _should_save_model(self, epoch: int, batch: int | None, logs: dict[str, Any] | None, filepath: str) -> bool:
        """Every save is written (Keras still tracks its `best`): ckptlog decides what stays."""
        super()._should_save_model(epoch, batch, logs, filepath)
        return True

    def _save_model(self, epoch: int, batch: int | None, logs: dict[str, Any] | None) -> None:
        super()._save_model(epoch, batch, logs)
        if process_index() != 0:
            return
        if not self.ckptlog.started:
            self._start()
        place = {"epoch": epoch + 1} if batch is None else {"epoch": epoch + 1, "batch": batch + 1}
        self.ckptlog.report(plain_metrics({**(logs or {}), **place}), self._get_file_path(epoch, batch, logs))

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        """Send what waits (ReportsUndelivered after `flush_timeout_s`); the run stays open unless `finish=True`."""
        try:
            if self.ckptlog.started:
                self.ckptlog.close()
                self.kept.pin(self.kept.view())
        finally:
            self.kept.close()
