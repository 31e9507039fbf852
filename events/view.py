"""The run VIEW (SPEC §4): a run's kept checkpoints, latest, best and watermarks.

One shape for every place a view appears: the processor publishes it on the compacted state
topic, `ckptlog fold` and `ckptlog inspect` print it per run, and readers (ckptlog.Reader)
parse it into this model. The fold builds views as plain dicts (processor/core/view.py: it
does so after every change, and a model per view would cost more than the fold); this model
is their contract. schemas/view.schema.json is generated from it, and tests check that every
view the fold builds, and every view in the golden `ckptlog fold` documents, validates.

Unknown keys are ignored, so readers keep working when a newer processor adds one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from events.models import Status

Consistency = Literal["committed", "validated"]
CONSISTENCIES: tuple[Consistency, ...] = ("committed", "validated")
_VIEW = ConfigDict(extra="ignore", frozen=True)


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


class ReportedCheckpoint(BaseModel):
    """Ray's `ReportedCheckpoint`: a kept checkpoint with its metrics (plus status and index)."""

    model_config = _VIEW
    path: str
    metrics: dict[str, Any] = Field(description="As reported, merged with the metrics of a VALIDATED result.")
    status: Status
    report_index: int = Field(description="0-based position of its report in the run's log.")


class RunView(BaseModel):
    """Value of the state topic (key = run id) and of `ckptlog fold` per run."""

    model_config = _VIEW
    checkpoints: list[ReportedCheckpoint] = Field(description="Kept checkpoints in sort order, best last.")
    latest: str | None = Field(description="Path of the newest registered checkpoint.")
    best: str | None = Field(description="Path of the last kept checkpoint (the best one).")
    committed: int = Field(description="Committed watermark: the number of reports.")
    validated: int = Field(description="Validated watermark: the smallest pending report index, else `committed`.")
    generation: int = Field(description="Current worker-group generation: 0 until the first restart.")
    index_in_generation: int = Field(description="Reports since the current generation started.")
    evicted: list[str] | SkipJsonSchema[None] = Field(
        default=None,
        exclude=True,  # dumps are the state topic's shape, which has no `evicted`
        json_schema_extra=_no_default,  # absent, never null: the schema says only "array, optional"
        description="`ckptlog fold` only: paths evicted by retention while folding the file, in "
        "eviction order. Absent on the state topic.",
    )

    def watermark(self, consistency: Consistency) -> int:
        return self.committed if consistency == "committed" else self.validated

    def reached(self, report_index: int, consistency: Consistency) -> bool:
        """Ray's get_all_reported_checkpoints predicate, generalised: watermark >= report_index."""
        return self.watermark(consistency) >= report_index

    def newer_than(self, other: RunView | None) -> bool:
        """False for a VIEW that moves a watermark backwards (an at-least-once replay repeating an
        older VIEW): readers keep the newer one they already have."""
        return other is None or (self.committed >= other.committed and self.validated >= other.validated)
