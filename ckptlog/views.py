"""The run VIEW as typed objects, and the watermark rule readers wait on (SPEC §4). Pure.

The processor publishes, per run, a VIEW on the compacted state topic after every change;
it carries the very watermarks (`committed`, `validated`) it reflects. Waiting on the VIEW's
own watermark therefore guarantees the returned checkpoints include everything up to that
report — which the separate watermark events alone cannot (they may be read before the VIEW
of the same transaction arrives on its topic).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ckptlog.errors import ClientError
from events.models import Status

Consistency = Literal["committed", "validated"]
CONSISTENCIES: tuple[Consistency, ...] = ("committed", "validated")
_VIEW = ConfigDict(extra="ignore", frozen=True)


class ReportedCheckpoint(BaseModel):
    """Ray's `ReportedCheckpoint`: a kept checkpoint with its metrics (plus status and index)."""

    model_config = _VIEW
    path: str
    metrics: dict[str, Any]
    status: Status
    report_index: int


class RunView(BaseModel):
    """A run's VIEW: kept checkpoints in sort order (best last), latest, best, watermarks."""

    model_config = _VIEW
    checkpoints: list[ReportedCheckpoint] = []
    latest: str | None = None
    best: str | None = None
    committed: int = 0
    validated: int = 0
    generation: int = 0
    index_in_generation: int = 0

    def watermark(self, consistency: Consistency) -> int:
        return self.committed if consistency == "committed" else self.validated

    def reached(self, report_index: int, consistency: Consistency) -> bool:
        """Ray's get_all_reported_checkpoints predicate, generalised: watermark >= report_index."""
        return self.watermark(consistency) >= report_index

    def newer_than(self, other: RunView | None) -> bool:
        """False for a VIEW that moves a watermark backwards (an at-least-once replay repeating an
        older VIEW): readers keep the newer one they already have."""
        return other is None or (self.committed >= other.committed and self.validated >= other.validated)


def check_consistency(consistency: str) -> Consistency:
    if consistency not in CONSISTENCIES:
        raise ClientError(
            f"consistency {consistency!r} is not one of {', '.join(CONSISTENCIES)}; use "
            "'committed' (reported) or 'validated' (reported and no validation pending)"
        )
    return consistency
