"""What the demo's training job does: a few runs with different retention, scores and events.

Deterministic from the seed, so two demo runs report the same metrics and the evaluator
(ckptlog.demo.validation) gives the same scores, timeouts and failures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class RunPlan:
    run_id: str
    name: str  # the run's directory and its seed: the same across demo runs, unlike the run id
    keep: int
    score_attribute: str
    score_order: Literal["max", "min"]
    validate_every: int  # 0: never; 1: every checkpoint; n: every n-th
    restart_at: int | None  # report number after which the worker group restarts
    metrics_only_every: int  # every n-th report has no checkpoint (0: never)
    timeout_s: float = 0.6

    def validates(self, step: int) -> bool:
        return self.validate_every > 0 and step % self.validate_every == 0

    def has_checkpoint(self, step: int) -> bool:
        return not (self.metrics_only_every and step % self.metrics_only_every == self.metrics_only_every - 1)


def default_plans(count: int, prefix: str) -> list[RunPlan]:
    """Up to three flavours, cycled: validated-only scores, min-loss with a restart, mixed."""
    flavours = [
        lambda run, name: RunPlan(
            run,
            name,
            keep=3,
            score_attribute="eval/acc",
            score_order="max",
            validate_every=1,
            restart_at=None,
            metrics_only_every=0,
        ),
        lambda run, name: RunPlan(
            run,
            name,
            keep=2,
            score_attribute="loss",
            score_order="min",
            validate_every=0,
            restart_at=15,
            metrics_only_every=0,
        ),
        lambda run, name: RunPlan(
            run,
            name,
            keep=4,
            score_attribute="val_acc",
            score_order="max",
            validate_every=5,
            restart_at=20,
            metrics_only_every=7,
        ),
    ]
    names = [f"{('resnet', 'bert', 'vit')[i % 3]}{'' if i < 3 else i // 3}" for i in range(count)]
    return [flavours[i % 3](f"{prefix}-{name}", name) for i, name in enumerate(names)]
