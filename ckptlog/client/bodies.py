"""Build input events and check them with the processor's own decoder before they are sent.

`encode_checked` runs `ckptlog.events.codec.decode_event` — the exact code the processor runs — on
the encoded bytes, so anything the processor would dead-letter at decode time (a typo'd
field, `num_to_keep=0`, a payload over 1 MiB, a non-JSON metric) fails here, in the caller's
stack, with the same reason code and message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ckptlog.client.errors import InvalidEvent
from ckptlog.events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, decode_event
from ckptlog.events.models import ValidationSpec
from ckptlog.events.rejections import Rejection

PathLike = str | os.PathLike[str]
ValidationArg = bool | Mapping[str, Any] | ValidationSpec


def as_url(path: PathLike, what: str) -> str:
    """An fsspec URL or absolute local path; a relative path would mean different things to
    the processor and the job, so it is refused."""
    if isinstance(path, os.PathLike):
        return str(Path(path).expanduser().resolve())
    if not isinstance(path, str) or not path:
        raise InvalidEvent(f"{what} must be a non-empty string or path, got {path!r}")
    if "://" not in path and not os.path.isabs(path):
        raise InvalidEvent(f"{what} {path!r} is relative; give an absolute path or a URL such as file:///runs/a")
    return path


def validation_body(validation: ValidationArg) -> bool | dict[str, Any]:
    """`True`/`False`, or `{"fn_kwargs": ..., "timeout_s": ...}` for the evaluator."""
    if isinstance(validation, bool):
        return validation
    if isinstance(validation, ValidationSpec):
        return validation.model_dump()
    if isinstance(validation, Mapping):
        try:  # checked here: the processor's union error ("should be a valid boolean") hides the field
            return ValidationSpec.model_validate(dict(validation)).model_dump()
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "validation"
            raise InvalidEvent(
                f"validation.{where}: {first['msg']}; pass {{'fn_kwargs': {{...}}, 'timeout_s': seconds > 0 or None}}"
            ) from None
    raise InvalidEvent(f"validation must be False, True or {{'fn_kwargs': ..., 'timeout_s': ...}}, got {validation!r}")


def _jsonable(value: Any) -> Any:
    """numpy/torch scalars and arrays become plain numbers and lists; anything else is an error."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        return value.item()
    if hasattr(value, "tolist") and callable(value.tolist):
        return value.tolist()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"{type(value).__qualname__} value {value!r} is not JSON; convert it (e.g. float(x))")


def envelope(kind: str, run_id: str, data: dict[str, Any], event_id: str, source: str) -> dict[str, Any]:
    """CloudEvents 1.0 structured mode, with the send time (ids, not times, make events unique)."""
    now = datetime.now(UTC).isoformat(timespec="milliseconds")
    return {
        "specversion": "1.0",
        "id": event_id,
        "source": source,
        "type": f"ckptlog.{kind}.v1",
        "subject": run_id,
        "time": now,
        "datacontenttype": "application/json",
        "data": data,
    }


def encode_checked(
    event: dict[str, Any], *, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH
) -> bytes:
    """Encode and decode with the processor's codec; InvalidEvent names the field and the fix."""
    kind, run_id = event.get("type", "?"), event.get("subject", "?")
    try:
        raw = json.dumps(event, separators=(",", ":"), ensure_ascii=False, allow_nan=True, default=_jsonable).encode()
    except (TypeError, ValueError) as exc:
        raise InvalidEvent(f"{kind} for run {run_id!r}: {exc}") from None
    decoded = decode_event(raw, str(run_id).encode(), max_bytes=max_bytes, max_depth=max_depth)
    if isinstance(decoded, Rejection):
        raise InvalidEvent(
            f"{kind} for run {run_id!r} would be rejected by the processor ({decoded.reason}): {decoded.message}"
        )
    return raw
