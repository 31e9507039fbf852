"""Hugging Face `Trainer` → ckptlog: a `TrainerCallback` that hands the Trainer's checkpoints to ckptlog.

    from ckptlog.integrations.transformers import CkptlogCallback

    args = TrainingArguments(output_dir="/mnt/ckpts/run-1", eval_strategy="epoch", save_strategy="epoch",
                             metric_for_best_model="accuracy", load_best_model_at_end=True)
    trainer = Trainer(model, args, ..., callbacks=[CkptlogCallback("run-1", num_to_keep=3)])

- **Reports.** The run's root is `args.output_dir`; each `on_save` reports
  `{output_dir}/checkpoint-{global_step}` once the Trainer has written it, with the metrics of the
  evaluation at that step (when there was one: another step's metrics would rank the wrong
  checkpoint), its `step` and `epoch`. Only the world's main process reports.
- **Retention.** `num_to_keep` checkpoints stay, ranked by `checkpoint_score_attribute` (default:
  `args.metric_for_best_model`, as the Trainer names it in its metrics, `eval_…`) in
  `checkpoint_score_order` (default: `args.greater_is_better`), plus the latest; ckptlog deletes the
  rest. `args.save_total_limit` must be None: the Trainer would rotate checkpoints too, and two
  rotations fight (the Trainer deletes by age what ckptlog keeps by score), so the callback refuses it
  at train start.
- **The best.** With `load_best_model_at_end`, the checkpoint loaded is ckptlog's best (the VIEW's),
  which is the Trainer's own `state.best_model_checkpoint` (on equal scores ckptlog prefers the later
  checkpoint, the Trainer the earlier; a WARNING says when they differ).
- **Resume.** `trainer.train(resume_from_checkpoint=True)` with the same `output_dir` and run id
  resumes from the newest checkpoint, which ckptlog always keeps, and reports as the run's next
  worker group.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Literal, Unpack

from ckptlog.client.connect import Connection
from ckptlog.integrations.kept import Kept, retention_note
from ckptlog.integrations.metrics import plain_metrics
from ckptlog.integrations.session import RunOptions, TrainerRun

try:
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
except ImportError as exc:  # pragma: no cover - exercised only without transformers
    raise ImportError(
        "ckptlog.integrations.transformers needs transformers: pip install 'ckptlog[transformers]'"
    ) from exc

__all__ = ["CkptlogCallback", "score_attribute"]
log = logging.getLogger(__name__)


def score_attribute(args: TrainingArguments) -> str | None:
    """`metric_for_best_model` as the Trainer finds it in an evaluation's metrics (`eval_` prefixed)."""
    metric = args.metric_for_best_model
    if metric is None:
        return None
    return metric if metric.startswith("eval_") else f"eval_{metric}"


class CkptlogCallback(TrainerCallback):
    """See the module docstring."""

    def __init__(
        self,
        run_id: str,
        *,
        num_to_keep: int | None = None,
        checkpoint_score_attribute: str | None = None,
        checkpoint_score_order: Literal["max", "min"] | None = None,
        bootstrap_servers: str | None = None,
        connection: Connection | None = None,
        **options: Unpack[RunOptions],
    ) -> None:
        self.ckptlog = TrainerRun(
            run_id, "transformers", bootstrap_servers=bootstrap_servers, connection=connection, **options
        )
        self.kept = Kept(self.ckptlog)
        self.num_to_keep, self.attribute, self.order = num_to_keep, checkpoint_score_attribute, checkpoint_score_order
        self.root: str | None = None
        self._evaluated: tuple[int, dict[str, Any]] | None = None  # (step, metrics) of the last evaluation

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if args.save_total_limit is not None:
            raise ValueError(
                f"TrainingArguments(save_total_limit={args.save_total_limit}) makes the Trainer delete checkpoints "
                "by age while ckptlog deletes them by score: two rotations would fight. Set save_total_limit=None "
                f"and give the number to keep to CkptlogCallback(num_to_keep={args.save_total_limit})"
            )
        self.root = root = os.path.abspath(args.output_dir or "trainer_output")  # the Trainer's own default
        if not state.is_world_process_zero:
            return
        attribute = self.attribute or score_attribute(args)
        order = self.order or ("max" if args.greater_is_better in (None, True) else "min")
        retention = {"num_to_keep": self.num_to_keep, "checkpoint_score_attribute": attribute}
        self.ckptlog.start(root, {**retention, "checkpoint_score_order": order}, args.world_size)
        self.kept.unpin()
        rule = f"the Trainer's own best ({attribute})" if attribute else "the Trainer's newest checkpoints"
        retention_note(self.ckptlog, rule, self.num_to_keep, attribute)

    def on_evaluate(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, metrics: Any = None, **kwargs: Any
    ) -> None:
        self._evaluated = (state.global_step, dict(metrics or {}))

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if not self.ckptlog.started or self.root is None:
            return
        step = state.global_step
        evaluated = self._evaluated[1] if self._evaluated is not None and self._evaluated[0] == step else {}
        metrics = plain_metrics({**evaluated, "step": step, "epoch": state.epoch})
        self.ckptlog.report(metrics, os.path.join(self.root, f"checkpoint-{step}"))
        if args.load_best_model_at_end:
            self._load_ckptlogs_best(state)

    def _load_ckptlogs_best(self, state: TrainerState) -> None:
        """Make the checkpoint the Trainer loads at the end ckptlog's best (kept for good, unlike an
        equal-scoring one ckptlog ranked below it)."""
        best = self.kept.best_path() if self.kept.current() else None  # during an outage: the Trainer's own
        if best is None or best == state.best_model_checkpoint:
            return
        if state.best_model_checkpoint is not None:
            log.warning(
                "event=transformers_best_differs run=%r ckptlog=%r trainer=%r message=%r",
                self.ckptlog.run_id,
                best,
                state.best_model_checkpoint,
                "ckptlog's best is not the Trainer's (equal scores: ckptlog ranks the later checkpoint better; or "
                "a score attribute other than metric_for_best_model); load_best_model_at_end loads ckptlog's",
            )
        state.best_model_checkpoint = best

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Send what waits (ReportsUndelivered after `flush_timeout_s`); the run stays open unless `finish=True`."""
        try:
            if self.ckptlog.started:
                self.ckptlog.close()
                self.kept.pin(self.kept.view())
        finally:
            self.kept.close()
