"""Reading older or newer versions of an event type.

An event type carries its version in its name (`ckptlog.report.v1`). When a v2 of an event
is introduced, its model replaces v1 in `models.py` and an *upcaster* is registered here
that rewrites a stored v1 body into the v2 shape before validation, so the fold only ever
sees the newest version and old logs replay unchanged. A version newer than this build
knows is rejected (`unknown_version`) rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Body = dict[str, Any]
Upcaster = Callable[[Body], Body]


def _deletion_completed_v1(body: Body) -> Body:
    """v1 confirmed one `checkpoint_path`; v2 confirms a list, `checkpoint_paths`."""
    data = body.get("data")
    if isinstance(data, dict) and "checkpoint_path" in data:
        rest = {k: v for k, v in data.items() if k != "checkpoint_path"}
        body = {**body, "data": {**rest, "checkpoint_paths": [data["checkpoint_path"]]}}
    return body  # anything else fails validation against v2 with a message naming the field


def _deletion_completed_v2(body: Body) -> Body:
    """v2 listed confirmed paths; v3 names each eviction, and v2 knew none (`eviction` null)."""
    data = body.get("data")
    if isinstance(data, dict) and "checkpoint_paths" in data:
        rest = {k: v for k, v in data.items() if k != "checkpoint_paths"}
        paths = data["checkpoint_paths"]
        deleted = [{"checkpoint_path": p} for p in paths] if isinstance(paths, list) else paths
        body = {**body, "data": {**rest, "deleted": deleted}}
    return body


#: (event name, from version) -> function producing the body of version + 1.
UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("deletion_completed", 1): _deletion_completed_v1,
    ("deletion_completed", 2): _deletion_completed_v2,
}


def upcast(name: str, version: int, newest: int, body: Body) -> Body | None:
    """Apply upcasters from `version` up to `newest`; None when a step is missing."""
    while version < newest:
        step = UPCASTERS.get((name, version))
        if step is None:
            return None
        body = step(body)
        version += 1
        body["type"] = f"ckptlog.{name}.v{version}"
    return body
