"""Fold rules that need no run state, so a sender can check them before sending (contract §8).

The fold (ckptlog.processor.core.fold) and the Reporter build the same Rejection here: the caller's
`InvalidEvent` says exactly what the processor's dead letter would.
"""

from __future__ import annotations

from ckptlog.events.rejections import Reason, Rejection


def validation_without_checkpoint(run_id: str) -> Rejection:
    return Rejection(
        Reason.VALIDATION_WITHOUT_CHECKPOINT,
        f"run {run_id!r}: the report asks for validation but carries no checkpoint (Ray's train.report raises "
        "here: validation requires a checkpoint); report the checkpoint with it, or drop the validation request",
    )
