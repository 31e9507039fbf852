"""Builders for input events as JSON lines, so tests read like the log they describe."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

from ckptlog.events.codec import decode_event
from ckptlog.events.decoded import DecodedEvent
from ckptlog.events.rejections import Rejection

_ids = itertools.count()


def line(kind: str, run: str, data: dict[str, Any], *, event_id: str | None = None, **extra: Any) -> bytes:
    body = {
        "specversion": "1.0",
        "id": event_id or f"ev-{next(_ids)}",
        "source": "test",
        "type": f"ckptlog.{kind}.v1",
        "subject": run,
        "data": data,
        **extra,
    }
    return json.dumps(body).encode()


def started(
    run: str = "r",
    root: str = "file:///data/r",
    keep: int | None = None,
    attr: str | None = None,
    order: str = "max",
    validation: dict[str, Any] | None = None,
    **kw: Any,
) -> bytes:
    data: dict[str, Any] = {
        "storage_path": root,
        "checkpoint_config": {"num_to_keep": keep, "checkpoint_score_attribute": attr, "checkpoint_score_order": order},
    }
    if validation is not None:
        data["validation"] = validation
    return line("run_started", run, data, **kw)


def report(
    run: str = "r",
    metrics: dict[str, Any] | None = None,
    path: str | None = None,
    validation: Any = False,
    generation: int | None = None,
    **kw: Any,
) -> bytes:
    data: dict[str, Any] = {
        "metrics": metrics or {},
        "checkpoint": {"path": path} if path else None,
        "validation": validation,
    }
    if generation is not None:
        data["generation"] = generation
    return line("report", run, data, **kw)


def result(
    run: str,
    path: str,
    status: str = "VALIDATED",
    metrics: dict[str, Any] | None = None,
    error: str | None = None,
    **kw: Any,
) -> bytes:
    data: dict[str, Any] = {"checkpoint_path": path, "status": status, "metrics": metrics or {}}
    if error is not None:
        data["error"] = error
    return line("validation_result", run, data, **kw)


def restart(run: str = "r", num_workers: int = 2, **kw: Any) -> bytes:
    return line("worker_group_restart", run, {"num_workers": num_workers}, **kw)


def deleted(run: str, path: str, **kw: Any) -> bytes:
    """A v1 completion (one path), as old logs hold: it is upcast to v2."""
    return line("deletion_completed", run, {"checkpoint_path": path}, **kw)


def deleted_many(run: str, paths: list[str], **kw: Any) -> bytes:
    body = json.loads(line("deletion_completed", run, {"checkpoint_paths": paths}, **kw))
    body["type"] = "ckptlog.deletion_completed.v2"
    return json.dumps(body).encode()


def settled(
    run: str, deleted: Sequence[tuple[str, int]] = (), refused: Sequence[tuple[str, int, str]] = (), **kw: Any
) -> bytes:
    """A v3 deletion_completed: evictions confirmed gone, and evictions the deleter refused."""
    data = {
        "deleted": [{"checkpoint_path": p, "eviction": e} for p, e in deleted],
        "refused": [{"checkpoint_path": p, "eviction": e, "reason": why} for p, e, why in refused],
    }
    body = json.loads(line("deletion_completed", run, data, **kw))
    body["type"] = "ckptlog.deletion_completed.v3"
    return json.dumps(body).encode()


def event(raw: bytes) -> DecodedEvent:
    decoded = decode_event(raw)
    assert not isinstance(decoded, Rejection), decoded
    return decoded


def finished(run: str = "r", keep: str | None = None, **kw: Any) -> bytes:
    """A run_finished: `keep` None sends `{}` (the default, the kept set as it is)."""
    return line("run_finished", run, {} if keep is None else {"keep": keep}, **kw)


def forgotten(run: str = "r", **kw: Any) -> bytes:
    return line("run_forgotten", run, {}, **kw)


def root_refused(
    run: str = "r", root: str = "file:///data/r", reason: str = "file:///data/r is a symlink", **kw: Any
) -> bytes:
    """The processor's fact that the run's root is reached through a symlink (contract §9)."""
    kw.setdefault("source", "ckptlog/processor")
    return line("root_refused", run, {"storage_path": root, "reason": reason}, **kw)


def reopened(run: str = "r", **kw: Any) -> bytes:
    return line("run_reopened", run, {}, **kw)
