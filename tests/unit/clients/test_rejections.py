"""Rejections are visible to the sender (issue 17 item 1): dead letters read back, counted in
`watch` and `inspect`, and a Reporter call that waits for the processor raises the reason."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from rich.console import Console

from ckptlog import EventRejected, NotConfirmed
from ckptlog.cli.rejections import rejections_table, render_rejections, render_warnings
from ckptlog.cli.watching import no_view_message
from ckptlog.client.dead_letters import DeadLetter, DeadLetterFeed, count_by_run, parse
from ckptlog.client.errors import ClientError
from ckptlog.client.event_warnings import EventWarning
from ckptlog.client.reporter import AsyncReporter
from ckptlog.client.table import run_table
from ckptlog.events.rejections import Reason, Rejection
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.reader import Record
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.service.records import RecordFactory, TopicNames
from tests.unit.clients.test_reporter import FakeProducer

FACTORY = RecordFactory(TopicNames("in", "ckpt", "val", "wm", "state", "dlq"), PartitionId("in", 1))
REPORT = json.dumps({"id": "e-7", "type": "ckptlog.report.v1", "subject": "run-1"}).encode()


def dead_letter(
    offset: int, key: bytes | None = b"run-1", value: bytes | None = REPORT, reason: Reason = Reason.PATH_OUTSIDE_ROOT
) -> Record:
    """A DLQ record exactly as the processor writes it (RecordFactory.dead_letter)."""
    original = Record("in", 1, offset, key, value, (("trace", b"x"),))
    out = FACTORY.dead_letter(original, Rejection(reason, f"checkpoint {offset} is outside the run's root"), "fold")
    return Record("dlq", 0, 100 + offset, out.key, out.value, tuple(out.headers), 1_767_225_600_000)


def test_a_dead_letter_reads_back_with_reason_message_and_coordinates() -> None:
    letter = parse(dead_letter(42))
    assert letter is not None
    assert (letter.run_id, letter.reason, letter.stage, letter.source) == (
        "run-1",
        "path_outside_root",
        "fold",
        "in[1]@42",
    )
    assert letter.message == "checkpoint 42 is outside the run's root"
    assert (letter.event_id, letter.event_type, letter.dlq_offset) == ("e-7", "ckptlog.report.v1", 142)
    assert letter.time == "2026-01-01T00:00:00+00:00"
    assert json.loads(json.dumps(letter.to_json()))["source"] == {"topic": "in", "partition": 1, "offset": 42}


def test_records_without_ckptlog_headers_and_runs_without_a_key() -> None:
    assert parse(Record("dlq", 0, 0, b"k", b"v", ())) is None
    keyless = parse(dead_letter(3, key=None))
    assert keyless is not None and keyless.run_id == "run-1"  # from the subject
    garbage = parse(dead_letter(4, key=None, value=b"\xff not json", reason=Reason.INVALID_UTF8))
    assert garbage is not None and garbage.run_id is None and garbage.event_id is None
    letters = [parse(dead_letter(i)) for i in range(3)] + [garbage]
    assert count_by_run([x for x in letters if x is not None]) == {"run-1": 3}


async def test_the_feed_counts_per_run_and_keeps_the_asked_runs_letters() -> None:
    feed = DeadLetterFeed(KafkaConnection("unused:9092"), "dlq", run_id="run-1")
    other = dead_letter(9, key=b"run-2")
    feed._take([dead_letter(5), other, dead_letter(6)])
    assert feed.counts == {"run-1": 2, "run-2": 1}
    found = feed.find("in", 1, 6)
    assert found is not None and found.offset == 6
    assert feed.find("in", 1, 9) is None  # another run's: counted, not kept


def _text(renderable: Any) -> str:
    console = Console(width=200, record=True, color_system=None, file=io.StringIO())
    console.print(renderable)
    return " ".join(console.export_text().split())  # captions wrap to the table's width


async def test_watch_and_the_rejections_table_show_them() -> None:
    letter = parse(dead_letter(42))
    assert letter is not None
    table = _text(rejections_table([letter], "1 rejection(s)"))
    assert "path_outside_root" in table and "in[1]@42" in table and "report.v1 e-7" in table
    assert "3 events rejected: `ckptlog rejections run-1`" in _text(run_table("run-1", None, rejected=3))
    assert "waiting for the processor" in _text(run_table("run-1", None))
    feed = DeadLetterFeed(KafkaConnection("unused:9092"), "dlq", run_id="run-1")
    assert "processor is running" in no_view_message("run-1", "state", feed)
    feed._take([dead_letter(1), dead_letter(2)])
    message = no_view_message("run-1", "state", feed)
    assert "rejected 2 of its events" in message and "path_outside_root" in message
    assert "processor is running" not in message


def test_at_80_columns_each_rejection_is_a_block_with_its_message_whole() -> None:
    letter = parse(dead_letter(42))
    assert letter is not None
    console = Console(width=80, record=True, color_system=None, file=io.StringIO())
    console.print(render_rejections([letter, letter], "2 rejection(s)", console.width))
    lines = console.export_text().splitlines()
    assert max(map(len, lines)) <= 80
    assert sum("path_outside_root" in line for line in lines) == 2  # one heading per rejection
    assert any("checkpoint 42 is outside the run's root" in line for line in lines)  # not folded into a column
    assert any("in[1]@42" in line and "report.v1 e-7" in line for line in lines)
    wide = Console(width=160, record=True, color_system=None, file=io.StringIO())
    wide.print(render_rejections([letter], "1 rejection(s)", wide.width))
    assert "│" in wide.export_text()  # wide consoles keep the table


class FakeConfirmer:
    """Rejects the events at `rejected` offsets, times out on `unknown` ones."""

    def __init__(self, rejected: set[int], unknown: frozenset[int] = frozenset()) -> None:
        self.rejected, self.unknown = rejected, unknown
        self.first_offset: int | None = None

    def sent(self, offset: int) -> None:
        self.first_offset = offset if self.first_offset is None else self.first_offset

    async def confirm(self, what: str, topic: str, partition: int, offset: int, timeout_s: float | None) -> None:
        if offset in self.unknown:
            raise NotConfirmed(f"{what}: not processed")
        if offset in self.rejected:
            letter = parse(dead_letter(offset))
            assert letter is not None
            raise EventRejected(f"{what} was rejected ({letter.reason}): {letter.message}", letter)

    async def close(self) -> None:
        return None


def confirming_reporter(confirmer: FakeConfirmer, **kwargs: Any) -> tuple[AsyncReporter, FakeProducer]:
    rep, fake = AsyncReporter("run-1", confirm=True, **kwargs), FakeProducer()
    rep._producer, rep._confirmer = fake, confirmer  # type: ignore[assignment]
    return rep, fake


async def test_a_rejected_report_raises_its_reason_and_does_not_use_up_its_index() -> None:
    rep, fake = confirming_reporter(FakeConfirmer(rejected={1}))
    await rep.report({"loss": 1.0}, "/runs/a/c0")  # offset 0: applied
    with pytest.raises(EventRejected) as caught:
        await rep.report({"loss": 0.9}, "/elsewhere/c1")  # offset 1: rejected
    assert caught.value.reason == "path_outside_root" and caught.value.letter.offset == 1
    assert "outside the run's root" in str(caught.value)
    await rep.report({"loss": 0.8}, "/runs/a/c1")  # the corrected resend takes the index the fold never counted
    ids = [body["id"] for body in fake.sent]
    assert ids[1] == ids[2] != ids[0] and rep.reports_sent == 2


async def test_a_report_not_confirmed_in_time_keeps_its_index_and_confirm_off_never_waits() -> None:
    rep, fake = confirming_reporter(FakeConfirmer(rejected=set(), unknown={0}))
    with pytest.raises(NotConfirmed):
        await rep.report({"loss": 1.0})
    await rep.report({"loss": 0.5})  # it may still be applied: the next report must not reuse its id
    assert fake.sent[0]["id"] != fake.sent[1]["id"] and rep.reports_sent == 2
    unconfirmed, _ = confirming_reporter(FakeConfirmer(rejected={0}))
    await unconfirmed.report({"loss": 1.0}, confirm=False)  # per call: not waited for


async def test_confirm_needs_a_confirming_reporter() -> None:
    rep = AsyncReporter("run-1")
    rep._producer = FakeProducer()  # type: ignore[assignment]
    sent = await rep.report({"x": 1})
    with pytest.raises(ClientError, match="confirm=True"):
        await rep.confirm(sent)


def test_the_letter_type_is_exported() -> None:
    import ckptlog

    assert ckptlog.DeadLetter is DeadLetter


def test_at_80_columns_each_warning_is_a_block_with_its_message_whole() -> None:
    message = "checkpoint 'file:///d/c7' has no metric 'val/loss'; it ranks last"
    w = EventWarning("r-1", "score_missing", message, "file:///data/r-1/ckpt-7", "ckptlog.events", 1, 42)
    console = Console(width=80, record=True, color_system=None, file=io.StringIO())
    console.print(render_warnings([w, w], "2 warning(s)", console.width))
    lines = console.export_text().splitlines()
    assert max(map(len, lines)) <= 80 and sum("score_missing" in line for line in lines) == 2
    assert any(message in line for line in lines), "the message is whole, not folded into a column"
    assert any("ckptlog.events[1]@42" in line for line in lines)
    wide = Console(width=160, record=True, color_system=None, file=io.StringIO())
    wide.print(render_warnings([w], "1 warning(s)", wide.width))
    assert "│" in wide.export_text()
