"""Issue 20 item 6: readers survive any bytes on any topic. A record the processor rightly rejected
(nested 20,000 levels deep) broke `ckptlog inspect --json` with a RecursionError; the readers
(ViewTable, the dead-letter parser, the state table under `inspect`, `export`) decoded with the
standard json module and no limits. Now one bounded decoder (ckptlog.events.codec.decode_json) reads every
topic, and what it cannot read is shown as such."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from ckptlog.cli.export import as_line
from ckptlog.client.dead_letters import parse
from ckptlog.client.view_table import ViewTable
from ckptlog.events.rejections import Reason
from ckptlog.events.view import page_key
from ckptlog.kafka.reader import Record
from tests.unit.clients.test_rejections import dead_letter
from tests.unit.clients.test_views import view

DEEP = b"[" * 20_000 + b"]" * 20_000
HUGE = b'{"a": "' + b"x" * 5_000_000 + b'"}'

REASONS = {
    "deep": "too deep (>64)",
    "deep_object": "too deep (>64)",
    "huge": f"too large ({len(HUGE)} bytes > 1048576)",
    "not_utf8": "not UTF-8 (byte 7)",
}
HOSTILE: dict[str, bytes] = {
    "deep": DEEP,
    "deep_object": b'{"a":' * 20_000 + b"1" + b"}" * 20_000,
    "huge": HUGE,
    "not_utf8": b'{"a": "\xff\xfe"}',
    "array": b"[1, 2, 3]",
    "number": b"42",
    "nan": b"NaN",
    "broken": b'{"checkpoints": [',
    "long_int": b"1" * 5000,
    "not_a_view": b'{"hello": "world"}',
}


def _state(key: bytes | None, value: bytes | None, offset: int, headers: tuple[Any, ...] = ()) -> Record:
    return Record("state", 0, offset, key, value, headers)


async def test_a_reader_keeps_running_through_every_hostile_state_record() -> None:
    table = ViewTable()
    await table.apply([_state(b"r", json.dumps(view(1, paths=("/a",))).encode(), 0)])
    junk = [_state(b"r", value, i + 1) for i, value in enumerate(HOSTILE.values())]
    junk += [
        _state(b"\xff\xfe", json.dumps(view(1)).encode(), 50),  # a key that is not UTF-8
        _state(b"r", json.dumps(view(2, paths=("/a", "/b"))).encode(), 51, (("h\x00", b"\xff\x00"),)),  # binary header
        _state(b"r\x1fpage\x1f" + b"9" * 5000 + b"\x1f0", b"{}", 52),  # a page number no int() takes
        _state(
            b"r\x1fpage\x1f99999999999999999\x1f0",
            b'{"run": "r", "page": 1, "part": 0, "parts": 1, "checkpoints": []}',
            53,
        ),
        _state(page_key("r", 0, 0).encode(), DEEP, 54),
        _state(b"r", json.dumps(view(3, paths=("/a", "/b", "/c"))).encode(), 55),
    ]
    for record in junk:  # one at a time: each must leave the table working
        await table.apply([record])
        table.raise_error()
    assert table.views["r"].committed == 3 and [c.path for c in table.views["r"].checkpoints] == ["/a", "/b", "/c"]
    problems = table.problems
    assert problems[page_key("r", 0, 0)].reason == "too deep (>65)"  # a VIEW nests one level deeper than its event
    assert problems["\\xff\\xfe"].reason == "key is not UTF-8 (byte 0)"
    assert any("neither a run id nor a page key" in p.reason for p in problems.values())
    result = await table.wait_for("r", 3, "committed", timeout_s=0)
    assert result.reached


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_dead_letter_of_any_bytes_parses_and_says_what_it_cannot_show(name: str) -> None:
    letter = parse(dead_letter(7, value=HOSTILE[name], reason=Reason.TOO_DEEP))
    assert letter is not None and letter.reason == "too_deep" and letter.source == "in[1]@7"
    shown = json.loads(json.dumps(letter.to_json(), allow_nan=True))
    if name in ("deep", "deep_object", "huge", "not_utf8"):
        assert shown["value"] is None and shown["undecodable"] == REASONS[name]
    else:  # UTF-8 text within the limits: shown as it is, JSON or not
        assert shown["value"] == HOSTILE[name].decode() and shown["undecodable"] is None


def test_a_dead_letter_with_binary_headers_and_a_key_that_is_not_utf8() -> None:
    record = dead_letter(8, key=b"\xff\xfe", value=DEEP)
    record = Record(
        record.topic, record.partition, record.offset, record.key, record.value, (*record.headers, ("x", b"\x00\xff"))
    )
    letter = parse(record)
    assert letter is not None and letter.run_id == "\ufffd\ufffd" and letter.undecodable == "too deep (>64)"


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_export_writes_any_value_as_one_line(name: str) -> None:
    value = HOSTILE[name].replace(b"[", b"[\n", 3)
    tally: Counter[str] = Counter()
    line = as_line(Record("in", 0, 0, b"run-1", value, ()), tally)
    assert line is not None and b"\n" not in line
