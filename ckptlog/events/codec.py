"""Bytes → typed input event, or a Rejection with a reason code. Pure: no I/O, no clock.

Every accepted event is one of the frozen Structs of ckptlog/events/decoded.py. Reports, validation
results and deletion completions first try msgspec's fast path there; everything it refuses
goes through one pydantic `validate_json` call (parsing and validation in Rust) and the model
is copied into its Struct. Only when pydantic fails do we re-parse in Python to find the
precise reason code.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pydantic_core
from pydantic import TypeAdapter, ValidationError

from ckptlog.events.decoded import (
    EVENT_TYPES,
    FAST_MAX_DEPTH,
    INPUT_TYPES,
    INPUTS,
    DecodedEvent,
    InputEvent,
    decode_fast,
    from_model,
)
from ckptlog.events.rejections import Reason, Rejection
from ckptlog.events.upcast import upcast

DEFAULT_MAX_BYTES = 1024 * 1024
DEFAULT_MAX_DEPTH = 64

INPUT_ADAPTER: TypeAdapter[InputEvent] = TypeAdapter(InputEvent)


@dataclass(frozen=True, slots=True)
class DecodeLimits:
    """How large and how deeply nested a JSON value a reader parses: the processor's
    `--max-payload-bytes` and `--max-depth` (the defaults, unless it runs with others)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH


DEFAULT_LIMITS = DecodeLimits()


@dataclass(frozen=True, slots=True)
class Undecodable:
    """Why a value was not decoded, e.g. `too deep (>64)`: what readers show instead of it. `code`
    is the matching rejection reason: payload_too_large, invalid_utf8, too_deep, invalid_json or
    invalid_envelope (not an object)."""

    reason: str
    code: str

    def __str__(self) -> str:
        return self.reason


def decode_json(raw: bytes, limits: DecodeLimits = DEFAULT_LIMITS) -> Any:
    """One JSON value (NaN and ±Infinity literals included, as the processor writes them), or an
    `Undecodable` saying why not. Never raises and never recurses without bound: the size is checked
    first, then the nesting with the processor's own scan, and only then is the value parsed. Every
    reader of a topic decodes through here (ckptlog inspect, watch, rejections, export, the AsyncReader)."""
    if len(raw) > limits.max_bytes:
        return Undecodable(f"too large ({len(raw)} bytes > {limits.max_bytes})", Reason.PAYLOAD_TOO_LARGE)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return Undecodable(f"not UTF-8 (byte {err.start})", Reason.INVALID_UTF8)
    if raw.count(b"{") + raw.count(b"[") > limits.max_depth and depth_of(raw) > limits.max_depth:
        return Undecodable(f"too deep (>{limits.max_depth})", Reason.TOO_DEEP)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:  # RecursionError: defensive, the scan bounds the nesting
        return Undecodable(f"not JSON ({str(err)[:200]})", Reason.INVALID_JSON)


def decode_object(raw: bytes, limits: DecodeLimits = DEFAULT_LIMITS) -> dict[str, Any] | Undecodable:
    """`decode_json`, for values that must be a JSON object."""
    value = decode_json(raw, limits)
    if isinstance(value, Undecodable | dict):
        return value
    return Undecodable(f"not a JSON object (a JSON {_JSON_TYPES[type(value)]})", Reason.INVALID_ENVELOPE)


_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}
_TYPE_NAME = re.compile(r"^ckptlog\.([a-z_]+)\.v([0-9]+)$")


def decode_event(
    raw: bytes,
    key: bytes | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> DecodedEvent | Rejection:
    """Decode one record value; `key` (the Kafka key) must equal `subject` when present."""
    if len(raw) > max_bytes:
        return Rejection(
            Reason.PAYLOAD_TOO_LARGE,
            f"payload is {len(raw)} bytes, over the limit of {max_bytes}; "
            "send large data by reference (a path) or raise --max-payload-bytes",
        )
    # The fast path accepts only events nested at most FAST_MAX_DEPTH deep: no bracket scan for them.
    event = decode_fast(raw) if max_depth >= FAST_MAX_DEPTH else None
    if event is None:
        decided = _decode_checked(raw, max_depth)
        if isinstance(decided, Rejection):
            return decided
        event = decided
    if key is not None and key != event.subject.encode():
        return Rejection(
            Reason.KEY_MISMATCH,
            f"Kafka key {key.decode('utf-8', 'replace')!r} differs from subject "
            f"{event.subject!r}; produce with key = run id",
        )
    return event


def _decode_checked(raw: bytes, max_depth: int) -> DecodedEvent | Rejection:
    """The route for whatever the fast path refused: the depth limit, then pydantic."""
    if raw.count(b"{") + raw.count(b"[") > max_depth and _depth(raw) > max_depth:
        return Rejection(
            Reason.TOO_DEEP, f"JSON nests deeper than {max_depth} levels; flatten the metrics or raise --max-depth"
        )
    try:
        model = INPUT_ADAPTER.validate_json(raw)
    except ValidationError as exc:
        decided = _diagnose(raw, exc)
        if isinstance(decided, Rejection):
            return decided
        model = decided  # an older version, upcast
    return to_decoded(model)


def to_decoded(model: InputEvent) -> DecodedEvent:
    """The Struct of an event pydantic accepted (extension attributes dropped)."""
    return from_model(model, EVENT_TYPES[model.type])


def _depth(raw: bytes) -> int:
    """Maximum bracket nesting outside strings (only computed when the cheap bound fails)."""
    depth = deepest = 0
    in_str = escaped = False
    for byte in raw:
        if in_str:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_str = False
        elif byte == 0x22:
            in_str = True
        elif byte in (0x7B, 0x5B):
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x7D, 0x5D):
            depth -= 1
    return deepest


_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"{}[]")))


def depth_of(raw: bytes) -> int:
    """`_depth`, exactly, and several times faster for a value without a backslash (most VIEWs and
    pages): its strings are then the pieces between the 2k-th and (2k+1)-th quote, dropped by a
    split, and only the brackets left are walked."""
    if b"\\" in raw:
        return _depth(raw)
    depth = deepest = 0
    for byte in b"".join(raw.split(b'"')[::2]).translate(None, _NOT_BRACKETS):
        if byte == 0x7B or byte == 0x5B:
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _diagnose(raw: bytes, exc: ValidationError) -> InputEvent | Rejection:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return Rejection(Reason.INVALID_UTF8, f"value is not UTF-8 (byte {err.start}); encode events as UTF-8 JSON")
    try:
        body = pydantic_core.from_json(raw)
    except ValueError as err:
        return Rejection(Reason.INVALID_JSON, f"value is not JSON ({err}); send one JSON object per record")
    if not isinstance(body, dict):
        return Rejection(Reason.INVALID_ENVELOPE, "value must be a JSON object (a CloudEvents 1.0 envelope)")
    kind = body.get("type")
    if not isinstance(kind, str):
        return Rejection(
            Reason.INVALID_ENVELOPE, "field 'type' is missing or not a string; set e.g. type='ckptlog.report.v1'"
        )
    match = _TYPE_NAME.match(kind)
    if match is None or match.group(1) not in INPUT_TYPES:
        known = ", ".join(f"ckptlog.{n}.v{v}" for n, v in INPUT_TYPES.items())
        return Rejection(Reason.UNKNOWN_TYPE, f"unknown event type {kind!r}; known types: {known}")
    name, version = match.group(1), int(match.group(2))
    newest = INPUT_TYPES[name]
    if version != newest:
        return _upcast_or_reject(body, name, version, newest)
    return _from_errors(exc)


def _upcast_or_reject(body: dict[str, Any], name: str, version: int, newest: int) -> InputEvent | Rejection:
    upgraded = upcast(INPUTS[name].upcasters, name, version, newest, body) if version < newest else None
    if upgraded is None:
        return Rejection(
            Reason.UNKNOWN_VERSION,
            f"ckptlog.{name}.v{version} is not readable by this build "
            f"(newest known: v{newest}); upgrade ckptlog or send v{newest}",
        )
    try:
        return INPUT_ADAPTER.validate_python(upgraded)
    except ValidationError as exc:
        return _from_errors(exc)


def _from_errors(exc: ValidationError) -> Rejection:
    """Turn pydantic's first error into a reason code and a message naming the field."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = [str(p) for p in first["loc"][1:]]  # drop the union tag
    where = ".".join(loc) or "event"
    hint = _hint(loc, first)
    message = f"{where}: {first['msg']}{hint}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more error(s))"
    if not loc or loc[0] != "data":
        return Rejection(Reason.INVALID_ENVELOPE, message)
    if "checkpoint_config" in loc:
        return Rejection(Reason.INVALID_CONFIG, message)
    return Rejection(Reason.INVALID_DATA, message)


def _hint(loc: list[str], error: Any) -> str:
    if error["type"] == "missing":
        return "; add the field"
    if error["type"] == "extra_forbidden":
        return "; remove it (check the spelling against docs/contract.md §2)"
    if "num_to_keep" in loc:
        return "; use an int >= 1, or null to keep every checkpoint"
    return ""
