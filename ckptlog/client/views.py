"""The run VIEW as typed objects, and the watermark rule readers wait on (contract §4). Pure.

The model is the contract's (ckptlog/events/view.py), re-exported here for the clients. The processor
publishes, per run, a VIEW on the compacted state topic after every change; it carries the very
watermarks (`committed`, `validated`) it reflects. Waiting on the VIEW's own watermark therefore
guarantees the returned checkpoints include everything up to that report — which the separate
watermark events alone cannot (they may be read before the VIEW of the same transaction arrives
on its topic).
"""

from __future__ import annotations

from ckptlog.client.errors import ClientError
from ckptlog.events.view import CONSISTENCIES, Consistency, ReportedCheckpoint, RunView

__all__ = ["CONSISTENCIES", "Consistency", "ReportedCheckpoint", "RunView", "check_consistency"]


def check_consistency(consistency: str) -> Consistency:
    if consistency not in CONSISTENCIES:
        raise ClientError(
            f"consistency {consistency!r} is not one of {', '.join(CONSISTENCIES)}; use "
            "'committed' (reported) or 'validated' (reported and no validation pending)"
        )
    return consistency
