"""What one applied event produces: output events, deletions to perform, or a rejection."""

from __future__ import annotations

from collections.abc import Sequence
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


class Effects(NamedTuple):
    """What one event did. A tuple so the fold builds one per event cheaply; never mutated."""

    outputs: Sequence[Output] = ()
    deletions: Sequence[Deletion] = ()
    rejection: Rejection | None = None
    duplicate: bool = False


NOTHING = Effects()
DUPLICATE = Effects(duplicate=True)


def rejected(rejection: Rejection) -> Effects:
    return Effects(rejection=rejection)
