"""The codec: every kind of bad input gets its reason code; good input round-trips."""

from __future__ import annotations

import json
import math

import pytest

from ckptlog.events import Reason, Rejection, decode_event
from ckptlog.events.decoded import INPUTS, Report
from tests.factories import line, report, started


def reason(raw: bytes, key: bytes | None = None, **kw: int) -> Reason:
    decoded = decode_event(raw, key, **kw)
    assert isinstance(decoded, Rejection), decoded
    assert decoded.message  # every rejection explains itself
    return decoded.reason


def test_report_with_nan_and_infinity_metrics_is_accepted() -> None:
    raw = (
        b'{"specversion":"1.0","id":"a","source":"s","type":"ckptlog.report.v1","subject":"r",'
        b'"data":{"metrics":{"loss":NaN,"hi":Infinity,"lo":-Infinity},"checkpoint":null}}'
    )
    event = decode_event(raw)
    assert not isinstance(event, Rejection) and event.type == "ckptlog.report.v1"
    assert math.isnan(event.data.metrics["loss"]) and event.data.metrics["hi"] == math.inf
    assert event.data.metrics["lo"] == -math.inf


def test_extension_attributes_are_accepted_and_ignored() -> None:
    """Validated (lower-case alphanumeric names) by pydantic, then dropped: the decoded event
    is the one without them, so they cannot change what the fold does."""
    plain = decode_event(report(event_id="x"))
    event = decode_event(report(event_id="x", traceparent="00-abc"))
    assert isinstance(event, Report) and event == plain
    assert not hasattr(event, "traceparent")


@pytest.mark.parametrize(
    "raw, expected",
    [
        (b"\xff\xfe{}", Reason.INVALID_UTF8),
        (b"{nope", Reason.INVALID_JSON),
        (b"[1, 2]", Reason.INVALID_ENVELOPE),
        (line("report", "r", {"metrics": {}}, specversion="0.3"), Reason.INVALID_ENVELOPE),
        (line("report", "", {"metrics": {}}), Reason.INVALID_ENVELOPE),
        (line("report", "a\x01b", {"metrics": {}}), Reason.INVALID_ENVELOPE),
        (line("report", "x" * 257, {"metrics": {}}), Reason.INVALID_ENVELOPE),
        (line("report", "r", {"metrics": {}}, Bad_Name=1), Reason.INVALID_ENVELOPE),
        (line("report", "r", {"metrics": {}}, time="yesterday"), Reason.INVALID_ENVELOPE),
        (line("report", "r", {"metrics": {}}, datacontenttype="text/plain"), Reason.INVALID_ENVELOPE),
        (line("nonsense", "r", {}), Reason.UNKNOWN_TYPE),
        (line("report", "r", {"metrics": {}}).replace(b"report.v1", b"report.v9"), Reason.UNKNOWN_VERSION),
        (line("report", "r", {}), Reason.INVALID_DATA),
        (line("report", "r", {"metrics": []}), Reason.INVALID_DATA),
        (line("report", "r", {"metrics": {}, "checkpoint": {"path": 3}}), Reason.INVALID_DATA),
        (line("report", "r", {"metrics": {}, "validation": {"timeout_s": 0}}), Reason.INVALID_DATA),
        (line("report", "r", {"metrics": {}, "generation": "1"}), Reason.INVALID_DATA),
        (line("report", "r", {"metrics": {}, "surprise": 1}), Reason.INVALID_DATA),
        (line("worker_group_restart", "r", {"num_workers": 0}), Reason.INVALID_DATA),
        (line("validation_result", "r", {"checkpoint_path": "p", "status": "MAYBE"}), Reason.INVALID_DATA),
        (started(keep=0), Reason.INVALID_CONFIG),
        (started(order="up"), Reason.INVALID_CONFIG),
    ],
)
def test_bad_input_reason_codes(raw: bytes, expected: Reason) -> None:
    assert reason(raw) == expected


def test_missing_field_message_names_the_field() -> None:
    decoded = decode_event(line("report", "r", {"checkpoint": None}))
    assert isinstance(decoded, Rejection)
    assert "data.metrics" in decoded.message and "add the field" in decoded.message


def test_key_must_equal_subject() -> None:
    assert reason(report("run-a"), key=b"run-b") == Reason.KEY_MISMATCH
    assert not isinstance(decode_event(report("run-a"), b"run-a"), Rejection)


def test_payload_limit() -> None:
    raw = report(metrics={"blob": "x" * 2000})
    assert reason(raw, max_bytes=1000) == Reason.PAYLOAD_TOO_LARGE
    assert not isinstance(decode_event(raw, max_bytes=10_000), Rejection)


def test_depth_limit_counts_nesting_not_brackets_in_strings() -> None:
    nested: dict[str, object] = {}
    node = nested
    for _ in range(70):
        node["a"] = {}
        node = node["a"]  # type: ignore[assignment]
    assert reason(report(metrics=nested), max_depth=64) == Reason.TOO_DEEP
    flat_but_bracketed = report(metrics={"s": "{[" * 100})
    assert not isinstance(decode_event(flat_but_bracketed, max_depth=64), Rejection)


def test_upcaster_reads_an_older_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """A v0 report whose metrics were called `values` is upcast to v1 before validation."""
    import ckptlog.events.codec as codec

    def v0_to_v1(body: dict[str, object]) -> dict[str, object]:
        data = dict(body["data"])  # type: ignore[call-overload]
        data["metrics"] = data.pop("values")
        return {**body, "data": data}

    monkeypatch.setitem(INPUTS["report"].upcasters, 0, v0_to_v1)  # type: ignore[index]
    raw = json.dumps(
        {
            "specversion": "1.0",
            "id": "x",
            "source": "s",
            "type": "ckptlog.report.v0",
            "subject": "r",
            "data": {"values": {"loss": 1.0}},
        }
    ).encode()
    event = codec.decode_event(raw)
    assert (
        not isinstance(event, Rejection) and event.type == "ckptlog.report.v1" and event.data.metrics == {"loss": 1.0}
    )
    assert event.type == "ckptlog.report.v1"
