"""The msgspec fast path accepts a subset of what the pydantic models accept, with equal values:
the Struct it decodes equals the one `from_model` copies from pydantic's model.

Bodies are generated around the edges where two validators could disagree: wrong types,
bool-for-int, floats-for-int, empty and over-long strings, control characters and a
trailing newline in the run id, extension attributes, unknown fields, duplicate keys,
bad timestamps, NaN/Infinity literals, huge numbers.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptlog.events.codec import INPUT_ADAPTER, _depth, decode_event, to_decoded
from ckptlog.events.decoded import FAST_MAX_DEPTH, FAST_NESTING, INPUT_TYPES, Report, decode_fast
from ckptlog.events.rejections import Reason, Rejection

weird_scalars = st.sampled_from([None, True, False, 0, 1, -1, 1.0, 2**70, 1e308, "", "x", "1", [], {}])
good_strings = st.sampled_from(["run-1", "r", "ü-run", "x" * 256, " ", "/r/c1", "file:///r/c"])
odd_strings = st.one_of(st.sampled_from(["", "a\n", "a\x00b", "a\x7f", "x" * 257]), st.text(max_size=12))
good_times = st.sampled_from(["2026-01-31T12:00:00Z", "2026-01-31T12:00:00+01:00", "2026-01-31", "<absent>"])
odd_times = st.sampled_from(["2026-13-01T00:00:00Z", "yesterday", ""])
json_values: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**80), max_value=2**80),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=6),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=8,
)
maybe = st.one_of(st.just("<absent>"), weird_scalars, odd_strings)


def _put(body: dict[str, Any], key: str, value: Any) -> None:
    if value != "<absent>":
        body[key] = value


def _mostly(draw: st.DrawFn, valid: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> Any:
    """Usually a valid value, one time in eight an odd one: most bodies differ in one place."""
    return draw(odd) if draw(st.integers(0, 7)) == 0 else draw(valid)


@st.composite
def data_for(draw: st.DrawFn, kind: str) -> Any:
    if draw(st.integers(0, 19)) == 0:
        return draw(weird_scalars)
    data: dict[str, Any] = {}
    metrics = st.dictionaries(st.text(max_size=5), json_values, max_size=4)
    if kind == "report":
        _put(data, "metrics", _mostly(draw, metrics, maybe))
        _put(
            data,
            "checkpoint",
            _mostly(draw, st.one_of(st.none(), st.builds(lambda p: {"path": p}, good_strings)), maybe),
        )
        _put(
            data,
            "validation",
            _mostly(draw, st.sampled_from([True, False, "<absent>"]), st.one_of(st.just({"timeout_s": 5}), maybe)),
        )
        _put(data, "generation", _mostly(draw, st.sampled_from([0, 1, 7, "<absent>", None]), st.integers(-2, 3)))
    elif kind == "deletion_completed":
        _put(
            data,
            "checkpoint_paths",
            _mostly(
                draw,
                st.lists(good_strings, min_size=1, max_size=3),
                st.one_of(st.lists(odd_strings, max_size=2), maybe),
            ),
        )
    else:
        _put(data, "checkpoint_path", _mostly(draw, good_strings, maybe))
        if kind == "validation_result":
            _put(
                data,
                "status",
                _mostly(
                    draw,
                    st.sampled_from(["VALIDATED", "VALIDATION_FAILED", "VALIDATION_TIMEOUT"]),
                    st.sampled_from(["PENDING_VALIDATION", "validated", "<absent>"]),
                ),
            )
            _put(data, "metrics", _mostly(draw, st.one_of(metrics, st.just("<absent>")), maybe))
            _put(data, "error", _mostly(draw, st.one_of(st.none(), good_strings, st.just("<absent>")), maybe))
    if draw(st.integers(0, 19)) == 0:
        data["unknown_field"] = 1
    return data


@st.composite
def raw_events(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["report", "report", "validation_result", "deletion_completed", "run_started"]))
    body: dict[str, Any] = {}
    _put(body, "specversion", _mostly(draw, st.just("1.0"), st.sampled_from(["0.3", 1.0, "<absent>"])))
    _put(body, "id", _mostly(draw, good_strings, maybe))
    _put(body, "source", _mostly(draw, good_strings, maybe))
    version = INPUT_TYPES[kind]
    _put(
        body,
        "type",
        _mostly(
            draw, st.just(f"ckptlog.{kind}.v{version}"), st.sampled_from([f"ckptlog.{kind}.v{version + 1}", "x", 7])
        ),
    )
    _put(body, "subject", _mostly(draw, good_strings, maybe))
    _put(body, "time", _mostly(draw, good_times, st.one_of(odd_times, maybe)))
    _put(
        body,
        "datacontenttype",
        _mostly(draw, st.sampled_from(["<absent>", None, "application/json"]), st.just("text/plain")),
    )
    body["data"] = draw(data_for(kind))
    if draw(st.integers(0, 19)) == 0:
        body[draw(st.sampled_from(["traceparent", "Bad-Name", "partitionkey"]))] = "v"
    raw = json.dumps(body, allow_nan=True)
    if draw(st.integers(0, 9)) == 0:  # a duplicate key: both decoders must take the same (last) one
        raw = '{"subject": "dup", ' + raw[1:]
    return raw.encode()


def _plain(value: Any) -> str:
    """JSON text: unlike ==, it tells 1 from 1.0 and True, and 0.0 from -0.0."""
    return json.dumps(msgspec.to_builtins(value), sort_keys=True)


@settings(max_examples=3000, deadline=None)
@given(raw=raw_events())
def test_fast_path_accepts_a_subset_with_equal_values(raw: bytes) -> None:
    fast = decode_fast(raw)
    if fast is None:
        return
    model = INPUT_ADAPTER.validate_json(raw)  # raises if pydantic would have refused it
    slow = to_decoded(model)
    assert type(fast) is type(slow) and fast.type == model.type
    assert fast == slow and _plain(fast) == _plain(slow)


def _route(raw: bytes) -> str:
    """Which route decoded `raw`: "fast", "pydantic" or "rejected"."""
    event = decode_event(raw)
    if isinstance(event, Rejection):
        return "rejected"
    assert isinstance(event, Report)
    return "fast" if decode_fast(raw) is not None else "pydantic"


def test_common_events_take_the_fast_path_and_the_rest_do_not() -> None:
    base = {
        "specversion": "1.0",
        "id": "a",
        "source": "s",
        "type": "ckptlog.report.v1",
        "subject": "r",
        "time": "2026-01-31T12:00:00Z",
        "data": {"metrics": {"acc": 1}, "checkpoint": {"path": "/r/c"}},
    }
    assert _route(json.dumps(base).encode()) == "fast"
    with_extension = {**base, "traceparent": "00-abc"}
    assert _route(json.dumps(with_extension).encode()) == "pydantic"
    with_spec = {**base, "data": {**base["data"], "validation": {"timeout_s": 3}}}
    assert _route(json.dumps(with_spec).encode()) == "pydantic"
    trailing_newline = {**base, "subject": "r\n"}
    assert _route(json.dumps(trailing_newline).encode()) == "rejected"


def _report_with(value: Any) -> bytes:
    return json.dumps(
        {
            "specversion": "1.0",
            "id": "a",
            "source": "s",
            "type": "ckptlog.report.v1",
            "subject": "r",
            "data": {"metrics": {"m": value}},
        }
    ).encode()


def _nested(levels: int, kind: str = "list") -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value] if kind == "list" else {"k": value}
    return value


def test_fast_path_vouches_for_the_depth_limit() -> None:
    """An event the fast path accepts nests at most FAST_MAX_DEPTH deep, so decode_event may
    skip its bracket scan; deeper metrics still decode, through pydantic."""
    for kind in ("list", "dict"):
        at_bound, beyond = _report_with(_nested(FAST_NESTING, kind)), _report_with(_nested(FAST_NESTING + 1, kind))
        assert _depth(at_bound) == FAST_MAX_DEPTH and _depth(beyond) == FAST_MAX_DEPTH + 1
        assert _route(at_bound) == "fast"
        assert decode_fast(beyond) is None
        assert _route(beyond) == "pydantic"


def test_a_depth_limit_below_the_fast_paths_bound_is_still_enforced() -> None:
    raw = _report_with(_nested(2))  # depth 5: the fast path alone would accept it
    assert _depth(raw) == 5 and decode_fast(raw) is not None
    assert isinstance(decode_event(raw, max_depth=5), Report)
    rejected = decode_event(raw, max_depth=4)
    assert isinstance(rejected, Rejection) and rejected.reason == Reason.TOO_DEEP


deep_values: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.none(), st.integers(), st.text(max_size=2)),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=2), st.dictionaries(st.text(max_size=2), inner, min_size=1, max_size=2)
    ),
    max_leaves=30,
)


@settings(max_examples=500, deadline=None)
@given(value=deep_values)
def test_what_the_fast_path_accepts_is_never_deeper_than_its_bound(value: Any) -> None:
    raw = _report_with(value)
    if decode_fast(raw) is not None:
        assert _depth(raw) <= FAST_MAX_DEPTH
    else:
        assert _depth(raw) > FAST_MAX_DEPTH
