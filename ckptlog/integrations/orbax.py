"""JAX/Orbax → ckptlog: a `CheckpointManager` whose retention is ckptlog's.

    import orbax.checkpoint as ocp
    from ckptlog.integrations.orbax import CkptlogCheckpointManager

    options = ocp.CheckpointManagerOptions(max_to_keep=3, best_fn=lambda m: m["val_loss"], best_mode="min")
    with CkptlogCheckpointManager("/mnt/ckpts/run-1", options=options, run_id="run-1") as manager:
        manager.save(step, args=ocp.args.StandardSave(state), metrics={"val_loss": loss})

It takes CheckpointManager's arguments, plus `run_id`, `connection=`/`bootstrap_servers=` and the
keyword arguments of `TrainerRun` (ckptlog/integrations/session.py).

- **ckptlog decides what stays.** The options' `max_to_keep`, `keep_period` and `keep_time_interval`
  become the run's `num_to_keep`, `keep_every_n_steps` (by the reported `step`) and
  `keep_time_interval_s`, and Orbax itself runs with none of them (it deletes nothing). `best_fn`
  ranks: each report carries `best_fn(metrics)` as the metric `best_fn`, the score attribute
  (unless `checkpoint_score_attribute` names a metric), in `best_mode`'s order; without `best_fn`,
  the newest stay, as in Orbax. A `preservation_policy` is refused: give the retention as the
  options above. ckptlog also keeps the latest (one INFO line says so).
- **Finalized before reported.** A step is reported once Orbax has finalized it: at once for a
  synchronous save, else when a later `save`, `wait_until_finished` or `close` has waited for it (the
  order of the steps). Only process 0 reports, with the metrics given to `save` and the `step`.
- **Resume.** A new manager on the same directory and run id goes on with the same run; Orbax's
  `latest_step()` read from the directory is the run's latest (ckptlog keeps it). `manager.kept` is
  ckptlog's kept set; Orbax's `all_steps()` is Orbax's own record (`reload()` re-reads the directory).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
from collections import deque
from typing import Any

from ckptlog.client.connect import Connection
from ckptlog.integrations.kept import Kept, retention_note
from ckptlog.integrations.metrics import plain_metrics
from ckptlog.integrations.session import TrainerRun, split_options

try:
    import jax
    import orbax.checkpoint as ocp
    from orbax.checkpoint._src.path import step as step_lib
except ImportError as exc:  # pragma: no cover - exercised only without Orbax
    raise ImportError("ckptlog.integrations.orbax needs orbax-checkpoint: pip install 'ckptlog[orbax]'") from exc

__all__ = ["CkptlogCheckpointManager", "mapped_retention"]
log = logging.getLogger(__name__)
_SAVE = inspect.signature(ocp.CheckpointManager.save)


def mapped_retention(options: ocp.CheckpointManagerOptions, attribute: str | None) -> dict[str, Any]:
    """The run's retention from Orbax's options (see the module docstring)."""
    if options.preservation_policy is not None:
        raise ValueError(
            "CkptlogCheckpointManager(options=CheckpointManagerOptions(preservation_policy=...)): ckptlog decides "
            "what stays, and maps only max_to_keep, best_fn/best_mode, keep_period and keep_time_interval; give "
            "the retention as those (or as ckptlog's own keyword arguments) and no preservation_policy"
        )
    if attribute is None and options.best_fn is not None:
        attribute = "best_fn"
    retention: dict[str, Any] = {
        "num_to_keep": options.max_to_keep,
        "checkpoint_score_attribute": attribute,
        "checkpoint_score_order": options.best_mode if attribute is not None else "max",
    }
    if options.keep_period is not None:
        retention.update(keep_every_n_steps=options.keep_period, step_attribute="step")
    if options.keep_time_interval is not None:
        retention["keep_time_interval_s"] = options.keep_time_interval.total_seconds()
    return retention


class CkptlogCheckpointManager(ocp.CheckpointManager):  # type: ignore[misc]
    """See the module docstring."""

    def __init__(
        self,
        directory: Any,
        *args: Any,
        run_id: str,
        options: ocp.CheckpointManagerOptions | None = None,
        checkpoint_score_attribute: str | None = None,
        bootstrap_servers: str | None = None,
        connection: Connection | None = None,
        **kwargs: Any,
    ) -> None:
        run_options = split_options(kwargs)
        options = options or ocp.CheckpointManagerOptions()
        mapped = mapped_retention(options, checkpoint_score_attribute)
        self.retention = {k: v for k, v in mapped.items() if k not in run_options}  # ckptlog's own keywords win
        own = dataclasses.replace(options, max_to_keep=None, keep_period=None, keep_time_interval=None)
        super().__init__(directory, *args, options=own, **kwargs)
        self.best_fn = options.best_fn if checkpoint_score_attribute is None else None
        self.ckptlog = TrainerRun(
            run_id, "orbax", bootstrap_servers=bootstrap_servers, connection=connection, **run_options
        )
        self.kept = Kept(self.ckptlog)
        self.unreported: deque[tuple[int, dict[str, Any]]] = deque()  # saved, not known to be finalized

    def save(self, step: int, *args: Any, **kwargs: Any) -> bool:
        saved: bool = super().save(step, *args, **kwargs)
        self._report(len(self.unreported))  # the save waited for every earlier one
        if saved and jax.process_index() == 0:
            metrics = _SAVE.bind(self, step, *args, **kwargs).arguments.get("metrics") or {}
            self.unreported.append((step, metrics))
            if not self.is_saving_in_progress():
                self._report(len(self.unreported))
        return saved

    def wait_until_finished(self) -> None:
        super().wait_until_finished()
        self._report(len(self.unreported))

    def close(self) -> None:
        """Wait for the last save and report it, send what waits; the run stays open unless `finish=True`."""
        finished = False
        try:
            super().close()  # waits for the last save
            self._report(len(self.unreported))
            finished = True
        finally:
            try:
                if self.ckptlog.started:
                    self.ckptlog.close(finished)
            finally:
                self.kept.close()

    def _report(self, count: int) -> None:
        """Report the `count` oldest saves, which Orbax has finalized."""
        for _ in range(count):
            step, metrics = self.unreported.popleft()
            if not self.ckptlog.started:
                self._start()
            scored = {**plain_metrics(metrics), "step": step}
            if self.best_fn is not None:
                scored["best_fn"] = float(self.best_fn(metrics))
            self.ckptlog.report(scored, str(step_lib.build_step_path(self.directory, self._step_name_format, step)))

    def _start(self) -> None:
        root = str(self.directory)
        self.ckptlog.start(root if "://" in root else os.path.abspath(root), self.retention, jax.process_count())
        retention_note(
            self.ckptlog,
            f"Orbax's max_to_keep={self.retention['num_to_keep']}",
            self.retention["num_to_keep"],
            self.retention["checkpoint_score_attribute"],
        )
