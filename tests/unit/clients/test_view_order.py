"""Issue 20: readers took an older VIEW for the current one after an at-least-once repeat whenever the
watermarks were equal — a restart (generation going back) or a status change publishes a new VIEW
without moving `committed` or `validated`, and `RunView.newer_than` compares only those. Now each
state record names the input offset of its batch (`__ckptlog.input.offset`) and readers keep the
head with the highest; without the header they fall back to the watermark rule."""

from __future__ import annotations

import json
from typing import Any

from ckptlog.client.view_table import ViewTable
from ckptlog.events.state import StateTable
from ckptlog.kafka.reader import Record
from tests.unit.clients.test_views import view

HEADER = "__ckptlog.input.offset"


def head(offset: int, body: dict[str, Any], at: int | None) -> Record:
    headers = () if at is None else ((HEADER, str(at).encode()),)
    return Record("state", 0, offset, b"r", json.dumps(body).encode(), headers)


def restarted(generation: int) -> dict[str, Any]:
    return {**view(5), "generation": generation, "index_in_generation": 0 if generation else 5}


def status(value: str) -> dict[str, Any]:
    body = view(5, paths=("/a",))
    body["checkpoints"][0]["status"] = value
    return body


async def test_a_repeated_older_view_with_equal_watermarks_is_ignored() -> None:
    table = ViewTable()
    # the processor published gen 0 (input offset 10), then the restart (offset 11); an at_least_once
    # restart repeats both; a reader between the two repeats must keep generation 1
    await table.apply([head(0, restarted(0), 10), head(1, restarted(1), 11), head(2, restarted(0), 10)])
    assert table.views["r"].generation == 1
    await table.apply([head(3, restarted(1), 11)])
    assert table.views["r"].generation == 1


async def test_a_repeated_status_change_at_equal_watermarks_is_ignored() -> None:
    table = ViewTable()
    await table.apply([head(0, status("COMMITTED"), 3), head(1, status("VALIDATION_FAILED"), 7)])
    await table.apply([head(2, status("COMMITTED"), 3)])
    assert table.views["r"].checkpoints[0].status == "VALIDATION_FAILED"


async def test_without_the_header_the_watermark_rule_decides() -> None:
    table = ViewTable()
    await table.apply([head(0, view(5), None), head(1, view(4), None)])
    assert table.views["r"].committed == 5  # backwards: ignored
    await table.apply([head(2, restarted(3), None)])
    assert table.views["r"].generation == 3  # equal watermarks: taken, as before
    await table.apply([head(3, view(4), 100)])  # one side without the header: the watermark rule
    assert table.views["r"].committed == 5


def test_inspect_keeps_the_newest_head_by_offset_too() -> None:
    table = StateTable()
    for record in (head(0, restarted(0), 10), head(1, restarted(1), 11), head(2, restarted(0), 10)):
        table.take(f"state[0]@{record.offset}", record.key, record.value, record.headers)
    found = table.view("r")
    assert isinstance(found, tuple) and found[0]["generation"] == 1
