"""A run's story: what each input event that touched it did, as JSON-ready steps (contract §10).

Pure: the fold's `Effects` (or the rejection of an event) in, a `Step` out. Every effect is an
object with a `kind` and, where one applies, a `path`; the kinds are the names `EFFECT_KINDS`
lists, each from one output of the output table (ckptlog/events/outputs.py) or from the event itself.
`ckptlog history`, `ckptlog explain` and `AsyncReader.history` all print these steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ckptlog.events.decoded import (
    DecodedEvent,
    Report,
    RunFinished,
    RunForgotten,
    RunReopened,
    RunStarted,
    ValidationResult,
)
from ckptlog.events.outputs import (
    CHECKPOINT_EVICTED,
    CHECKPOINT_REGISTERED,
    CHECKPOINT_STATUS_CHANGED,
    CHECKPOINTS_DELETED,
    VALIDATION_REQUESTED,
    WARNING,
    WATERMARK,
    WORKER_GROUP_STARTED,
)
from ckptlog.events.rejections import Rejection
from ckptlog.processor.core.outputs import Effects

Effect = dict[str, Any]

DELETION_REFUSED = "deletion_refused"  # the warning code a refused deletion settles with (lifecycle.py)


def _registered(data: dict[str, Any]) -> list[Effect]:
    effect = {"kind": "registered", "path": data["checkpoint_path"], "report_index": data["report_index"]}
    effect["status"] = data["status"]
    if data.get("preserved") is not None:
        effect["preserved"] = data["preserved"]
    return [effect]


def _evicted(data: dict[str, Any]) -> list[Effect]:
    return [
        {
            "kind": "evicted",
            "path": data["checkpoint_path"],
            "report_index": data["report_index"],
            "reason": data["reason"],
        }
    ]


def _status(data: dict[str, Any]) -> list[Effect]:
    path, status, before = data["checkpoint_path"], data["status"], data["previous_status"]
    effect = {"kind": "status_changed", "path": path, "status": status, "previous_status": before}
    if data.get("error") is not None:
        effect["error"] = data["error"]
    return [effect]


def _warning(data: dict[str, Any]) -> list[Effect]:
    path = data.get("checkpoint_path")
    if data["code"] == DELETION_REFUSED:
        return [{"kind": DELETION_REFUSED, "path": path, "message": data["message"]}]
    effect = {"kind": WARNING.name, "code": data["code"], "message": data["message"]}
    return [effect | {"path": path}] if path is not None else [effect]


_OF_OUTPUT: dict[str, Callable[[dict[str, Any]], list[Effect]]] = {
    CHECKPOINT_REGISTERED.name: _registered,
    VALIDATION_REQUESTED.name: lambda d: [{"kind": VALIDATION_REQUESTED.name, "path": d["checkpoint_path"]}],
    CHECKPOINT_STATUS_CHANGED.name: _status,
    CHECKPOINT_EVICTED.name: _evicted,
    CHECKPOINTS_DELETED.name: lambda d: [{"kind": "deleted", "path": p} for p in d["checkpoint_paths"]],
    WATERMARK.name: lambda d: [{"kind": WATERMARK.name, **d}],
    WORKER_GROUP_STARTED.name: lambda d: [
        {"kind": "restart", "generation": d["generation"], "num_workers": d["num_workers"]}
    ],
    WARNING.name: _warning,
}
"""Output name -> its effects. Every output the fold makes has a row (tests/unit/explain)."""

EFFECT_KINDS = (
    "started",
    "registered",
    VALIDATION_REQUESTED.name,  # three effects are named as the output they come from
    "status_changed",
    "evicted",
    "deleted",
    DELETION_REFUSED,
    "restart",
    WARNING.name,
    WATERMARK.name,
    "finished",
    "reopened",
    "forgotten",
    "rejected",
    "duplicate",
)


def _of_event(event: DecodedEvent) -> list[Effect]:
    """What the event itself says happened, before its outputs (started, finished, reopened, forgotten)."""
    if isinstance(event, RunStarted):
        return [{"kind": "started", "storage_path": event.data.storage_path}]
    if isinstance(event, RunFinished):
        return [{"kind": "finished", "keep": event.data.keep}]
    if isinstance(event, RunReopened):
        return [{"kind": "reopened"}]
    if isinstance(event, RunForgotten):
        return [{"kind": "forgotten"}]
    return []


def effects_of(event: DecodedEvent, effects: Effects) -> list[Effect]:
    """The effects of one applied (or duplicate, or rejected-by-the-fold) event, in output order."""
    if effects.rejection is not None:
        effect = rejected(effects.rejection, "fold")
        path = _path_of(event)
        return [effect if path is None else effect | {"path": path}]  # so explain finds a refused report
    if effects.duplicate:
        return [{"kind": "duplicate"}]
    found = _of_event(event)
    for name, data in effects.outputs:
        found.extend(_OF_OUTPUT[name](data))
    return found


def _path_of(event: DecodedEvent) -> str | None:
    """The checkpoint path a report or a validation result names (None: another kind, or none)."""
    if isinstance(event, Report):
        return event.data.checkpoint.path if event.data.checkpoint is not None else None
    if isinstance(event, ValidationResult):
        return event.data.checkpoint_path
    return None


def rejected(rejection: Rejection, stage: str) -> Effect:
    return {"kind": "rejected", "reason": str(rejection.reason), "message": rejection.message, "stage": stage}


@dataclass(frozen=True, slots=True)
class Step:
    """One input event of a run and what folding it did. `time` is the event's CloudEvents
    `time` when it has one, else the broker's timestamp of the record (ISO 8601, UTC)."""

    offset: int
    id: str | None
    type: str | None
    time: str | None
    effects: list[Effect] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "id": self.id, "type": self.type, "time": self.time, "effects": self.effects}


def record_time(timestamp_ms: int | None) -> str | None:
    if timestamp_ms is None or timestamp_ms < 0:
        return None
    return datetime.fromtimestamp(timestamp_ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def step_of(offset: int, timestamp_ms: int | None, event: DecodedEvent | None, effects: list[Effect]) -> Step:
    """A step for an event (None: it could not be decoded, so only the rejection is known)."""
    if event is None:
        return Step(offset, None, None, record_time(timestamp_ms), effects)
    return Step(offset, event.id, event.type, event.time or record_time(timestamp_ms), effects)
