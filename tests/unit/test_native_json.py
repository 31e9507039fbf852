"""The compiled engine writes the document's JSON itself; it must be byte for byte what
`json.dumps` writes for the values the Python fold holds (metrics as msgspec decodes them)."""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.unit.native_required import ckptlog_native

native = ckptlog_native()

# JSON values the fast path accepts into metrics: finite floats, ints of up to 15 digits
# (exact as floats), any text, nested a few levels.
_ints = st.integers(min_value=-(10**15) + 1, max_value=10**15 - 1)
_floats = st.floats(allow_nan=False, allow_infinity=False)
_scalars = st.none() | st.booleans() | _ints | _floats | st.text()
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_metrics = st.dictionaries(st.text(max_size=8), _values, max_size=6)


@given(_floats)
@example(0.0)
@example(-0.0)
@example(1e16)
@example(1234567890123456.0)
@example(1e-4)
@example(1e-5)
@example(5e-324)
@example(1.7976931348623157e308)
@example(0.1 + 0.2)
@example(562949953421312.2)  # a tie: hypothesis found Rust's spelling 562949953421312.3
@settings(max_examples=3000)
def test_floats_are_written_as_python_repr(x: float) -> None:
    assert native.dumps_float(x) == json.dumps(x)


def test_ties_between_two_shortest_spellings_go_to_the_even_digit() -> None:
    """Between 2**49 and 2**53 a double can lie exactly halfway between two 16-digit decimals;
    Python's repr then takes the even one (Rust's shortest formatting, the upper one)."""
    for base in (2.0**49, 2.0**50, 2.0**51, 2.0**52):
        for i in range(2000):
            x = base + i * 0.125
            assert native.dumps_float(x) == repr(x) and native.dumps_float(-x) == repr(-x)
    for exponent in range(-320, 300, 7):  # other magnitudes, 17-digit values
        x = math.pi * 10.0**exponent
        assert native.dumps_float(x) == repr(x)


@given(st.text())
@example('\x00\x1f\x7f"\\\b\f\n\r\t/é\u2028😀')
@settings(max_examples=1000)
def test_strings_are_escaped_as_json_dumps_does(s: str) -> None:
    assert native.dumps_str(s) == json.dumps(s)


def _spellings(value: Any) -> list[str]:
    """The same metrics written compactly, pretty-printed, and with floats in exponent form."""
    compact = json.dumps(value, separators=(",", ":"))
    return [compact, json.dumps(value, indent=1), json.dumps(value).replace("e+", "E+")]


@given(_metrics)
@settings(max_examples=1500)
def test_metrics_are_rewritten_as_json_dumps_of_the_decoded_value(metrics: dict[str, Any]) -> None:
    for text in _spellings(metrics):
        assert native.dumps_metrics(text) == json.dumps(msgspec.json.decode(text))


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "b": 2, "a": 3}',  # a duplicate keeps its first place and takes its last value
        '{"x": {"k": 1, "k": {"j": [1, 2.50, -0.0, 1E2, 1e-7]}}}',
        '{"s": "\\u00e9\\ud83d\\ude00\\n", "t": true, "f": false, "n": null}',
        '{"big": 123456789012345, "neg": -123456789012345, "f": 12345678901234567890.0}',
        "{}",
    ],
)
def test_metrics_edge_cases(text: str) -> None:
    assert native.dumps_metrics(text) == json.dumps(msgspec.json.decode(text))


def test_out_of_range_numbers_are_left_to_python() -> None:
    assert native.dumps_metrics('{"a": 1e400}') is None
    assert native.dumps_metrics('{"a": [1, {"b": -1e400}]}') is None
