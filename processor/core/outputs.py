"""What one applied event produces: output events, deletions to perform, or a rejection."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from events.rejections import Rejection


class Output(NamedTuple):
    """One output event before its envelope: `type` is the short name (`watermark`).

    A tuple, not a dataclass: the fold makes two or three per event, and building a
    tuple is several times cheaper than a frozen dataclass.
    """

    type: str
    data: dict[str, Any]


class Deletion(NamedTuple):
    """An evicted path to delete once the eviction is durable, confined to `root`."""

    run_id: str
    path: str
    root: str


@dataclass(slots=True)
class Effects:
    outputs: list[Output] = field(default_factory=list)
    deletions: list[Deletion] = field(default_factory=list)
    rejection: Rejection | None = None
    duplicate: bool = False


def rejected(rejection: Rejection) -> Effects:
    return Effects(rejection=rejection)
