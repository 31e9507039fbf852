"""Reading older or newer versions of an event type.

An event type carries its version in its name (`ckptlog.report.v1`). When a v2 of an event
is introduced, its model replaces v1 in `models.py` and an *upcaster* written here (and named in
the kind's row of the input table, ckptlog/events/decoded.py `INPUT_KINDS`) rewrites a stored v1 body
into the v2 shape before validation, so the fold only ever sees the newest version and old
logs replay unchanged. A version newer than this build knows is rejected (`unknown_version`) rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Body = dict[str, Any]
Upcaster = Callable[[Body], Body]


def deletion_completed_v1(body: Body) -> Body:
    """v1 confirmed one `checkpoint_path`; v2 confirms a list, `checkpoint_paths`."""
    data = body.get("data")
    if isinstance(data, dict) and "checkpoint_path" in data:
        rest = {k: v for k, v in data.items() if k != "checkpoint_path"}
        body = {**body, "data": {**rest, "checkpoint_paths": [data["checkpoint_path"]]}}
    return body  # anything else fails validation against v2 with a message naming the field


def deletion_completed_v2(body: Body) -> Body:
    """v2 listed confirmed paths; v3 names each eviction, and v2 knew none (`eviction` null)."""
    data = body.get("data")
    if isinstance(data, dict) and "checkpoint_paths" in data:
        rest = {k: v for k, v in data.items() if k != "checkpoint_paths"}
        paths = data["checkpoint_paths"]
        deleted = [{"checkpoint_path": p} for p in paths] if isinstance(paths, list) else paths
        body = {**body, "data": {**rest, "deleted": deleted}}
    return body


def upcast(steps: Mapping[int, Upcaster], name: str, version: int, newest: int, body: Body) -> Body | None:
    """Apply `steps` (an input kind's upcasters, by the version each reads: ckptlog/events/decoded.py
    INPUT_KINDS) from `version` up to `newest`; None when a step is missing."""
    while version < newest:
        step = steps.get(version)
        if step is None:
            return None
        body = step(body)
        version += 1
        body["type"] = f"ckptlog.{name}.v{version}"
    return body
