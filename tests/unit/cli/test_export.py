"""`ckptlog export` (issue 17 item 3): records become lines `ckptlog fold` reads as the processor did."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ckptlog.cli.export import Bound, Exported, as_line, parse_bound, summary
from ckptlog.errors import ConfigError
from ckptlog.events.codec import decode_event
from ckptlog.events.rejections import Reason, Rejection
from ckptlog.kafka.reader import Record
from ckptlog.processor.foldfile import fold_lines

EVENT = {"specversion": "1.0", "id": "e1", "source": "t", "type": "ckptlog.report.v1", "subject": "r1"}


def record(value: bytes | None, key: bytes | None = b"r1") -> Record:
    return Record("in", 0, 0, key, value, ())


def test_bounds_are_offsets_or_times() -> None:
    assert parse_bound(None, "--from") is None
    assert parse_bound("120", "--from") == Bound(offset=120)
    assert parse_bound("2026-01-01T00:00:00Z", "--to") == Bound(time_ms=1_767_225_600_000)
    assert parse_bound("2026-01-01T01:00:00+01:00", "--to") == Bound(time_ms=1_767_225_600_000)
    assert parse_bound("2026-01-01T00:00:00", "--to") == Bound(time_ms=1_767_225_600_000)  # UTC
    with pytest.raises(ConfigError, match="--from 'yesterday' is neither an offset nor an ISO 8601 time"):
        parse_bound("yesterday", "--from")


def test_lines_fold_as_the_processor_folded_the_records() -> None:
    tally: Counter[str] = Counter()
    compact = json.dumps({**EVENT, "data": {"metrics": {"loss": 1.0}}}, separators=(",", ":")).encode()
    pretty = json.dumps({**EVENT, "id": "e2", "data": {"metrics": {"loss": float("nan")}}}, indent=2).encode()
    other_key = compact.replace(b'"id":"e1"', b'"id":"e3"')
    lines = [
        as_line(record(compact), tally),
        as_line(record(pretty), tally),
        as_line(record(None), tally),
        as_line(record(other_key, key=b"r2"), tally),  # the processor: key_mismatch
        as_line(record(b"not json\nat all"), tally),
        as_line(record(compact, key=None), tally),
    ]
    assert lines[0] == compact and lines[5] == compact
    assert lines[2] is None and lines[3] is None
    assert lines[1] is not None and b"\n" not in lines[1] and json.loads(lines[1])["id"] == "e2"
    assert lines[4] == b"not json at all"
    assert tally == {"tombstone": 1, "key_mismatch": 1, "reencoded": 2}
    folded = fold_lines(line for line in lines if line is not None)
    assert folded.document()["runs"]["r1"]["committed"] == 2  # e1 (twice: a duplicate) and e2
    assert [r["reason"] for r in folded.rejected] == ["invalid_json"]


def test_summary_names_the_ranges_and_what_was_left_out() -> None:
    result = Exported(lines=5, skipped=Counter({"tombstone": 1}), ranges={0: (0, 6), 1: (3, 3)})
    text = summary(result, "ckptlog.events", "log.jsonl")
    assert text.startswith("exported 5 records of ckptlog.events ([0] 0..5, [1] none) to log.jsonl")
    assert "1 tombstones left out" in text


@pytest.mark.parametrize("value", [b"", b" ", b"\t\r\n", b"\x0b"])
def test_a_blank_value_is_a_line_the_fold_rejects_as_the_processor_did(value: bytes) -> None:
    """Found by the whole-system test: `ckptlog fold` skips blank lines, so an exported blank value
    (dead-lettered by the processor as invalid_json) left no rejection in the fold of the export."""
    tally: Counter[str] = Counter()
    line = as_line(Record("in", 0, 7, None, value, ()), tally)
    assert line is not None and line.strip() and tally == {"blank": 1}
    online = decode_event(value)
    assert isinstance(online, Rejection) and online.reason == Reason.INVALID_JSON
    offline = decode_event(line)
    assert isinstance(offline, Rejection) and offline.reason == online.reason
