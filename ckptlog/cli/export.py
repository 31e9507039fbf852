"""`ckptlog export FILE`: the input log as CloudEvents JSON lines, for `ckptlog fold`.

Reads the input topic (or `--topic`) read_committed, from its start (or `--from`) to its end now
(or `--to`), every partition in offset order, and writes each record's value as one line — the
processor's own `deletion_completed` records included, since the fold reads them too. What-if
questions are then answered offline: `ckptlog fold FILE --default-num-to-keep 5` shows what other
processor defaults would keep, with no broker and nothing deleted (docs/processor.md, "What if").

So that the fold of the file equals what the processor folded, records that cannot be a line as
they are get fixed or left out, and are counted on stderr: a tombstone (no value: the processor
dead-letters it) is left out, as is a record whose key is not its event's `subject` (the processor
rejects it as `key_mismatch`; the file has no keys to check); a JSON value spread over several lines
is re-encoded on one.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, BinaryIO

import typer

from ckptlog.cli.errors import cli_errors, echo_err
from ckptlog.cli.main import app
from ckptlog.cli.options import settings_options
from ckptlog.errors import ConfigError
from ckptlog.processor.redaction import register_secrets

if TYPE_CHECKING:  # the codec and the Kafka reader load when the command runs (issue 38 item 8)
    from ckptlog.events.codec import DecodeLimits
    from ckptlog.kafka.connection import KafkaConnection
    from ckptlog.kafka.reader import Record
    from ckptlog.processor.service.settings import ServiceSettings

Opt = typer.Option


@dataclass(frozen=True, slots=True)
class Bound:
    """`--from`/`--to`: an offset (the same in every partition) or a time (ms since the epoch)."""

    offset: int | None = None
    time_ms: int | None = None


def parse_bound(text: str | None, flag: str) -> Bound | None:
    """`120` is an offset; `2026-01-31T12:00:00Z` (ISO 8601, UTC when no zone is given) is a time."""
    if text is None:
        return None
    if text.isdigit():
        return Bound(offset=int(text))
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"{flag} {text!r} is neither an offset nor an ISO 8601 time; give e.g. 1200 or 2026-01-31T12:00:00Z"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return Bound(time_ms=int(when.timestamp() * 1000))


@dataclass(slots=True)
class Exported:
    lines: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)  # partition -> [first, end)


BLANK = b"#blank record"
"""What an empty or blank value is written as: a line `ckptlog fold` rejects as invalid_json, as
the processor did the value (a blank line it would skip)."""


def as_line(record: Record, tally: Counter[str], limits: DecodeLimits | None = None) -> bytes | None:
    """The record's value as one line (no newline), or None when it is left out (`tally` says why).
    Values are parsed within the processor's `limits` (default the codec's; any bytes may be on the topic)."""
    from ckptlog.events.codec import DEFAULT_LIMITS, Undecodable, decode_json

    limits = limits or DEFAULT_LIMITS
    value = record.value
    if value is None:
        tally["tombstone"] += 1
        return None
    if record.key is not None and not _subject_is(value, record.key, limits):
        tally["key_mismatch"] += 1
        return None
    if not value or value.isspace():  # `ckptlog fold` skips blank lines; the processor dead-letters it
        tally["blank"] += 1
        return BLANK
    if b"\n" in value or b"\r" in value:
        body = decode_json(value, limits)
        if isinstance(body, Undecodable):  # rejected offline as online: only its line breaks go
            value = value.replace(b"\r", b" ").replace(b"\n", b" ")
        else:
            value = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        tally["reencoded"] += 1
    return value


def _subject_is(value: bytes, key: bytes, limits: DecodeLimits) -> bool:
    """Whether the event's `subject` is `key` — a byte search first, a parse only when unsure."""
    if b'"subject":"' + key + b'"' in value and value.count(b'"subject"') == 1:
        return True
    from ckptlog.events.codec import Undecodable, decode_json

    body = decode_json(value, limits)
    if isinstance(body, Undecodable):
        return True  # the processor dead-letters it before any key check; so does the fold
    subject = body.get("subject") if isinstance(body, dict) else None
    return not isinstance(subject, str) or subject.encode() == key


async def _bounds(conn: KafkaConnection, topic: str, bound: Bound | None) -> dict[int, int] | None:
    """Per partition, the offset a bound stands for."""
    if bound is None:
        return None
    from ckptlog.kafka.reader import offsets_at
    from ckptlog.kafka.topics import topic_partitions

    if bound.time_ms is not None:
        return await offsets_at(conn, topic, bound.time_ms)
    return dict.fromkeys(range(await topic_partitions(conn, topic)), bound.offset or 0)


async def export(
    conn: KafkaConnection,
    topic: str,
    out: BinaryIO,
    start: Bound | None = None,
    stop: Bound | None = None,
    partitions: list[int] | None = None,
    limits: DecodeLimits | None = None,
) -> Exported:
    """Write `topic`'s records in [start, stop) as lines to `out`; returns what was written and left out."""
    from ckptlog.kafka.reader import TopicReader

    result = Exported()
    first, end = await _bounds(conn, topic, start), await _bounds(conn, topic, stop)
    async with TopicReader(conn, topic, partitions or None, first, end) as reader:
        for pid, last in reader.end.items():
            result.ranges[pid.partition] = (await reader.position(pid), last)
        async for batch in reader.batches():
            for record in batch:
                line = as_line(record, result.skipped, limits)
                if line is not None:
                    out.write(line + b"\n")
                    result.lines += 1
    return result


def summary(result: Exported, topic: str, file: str) -> str:
    ranges = ", ".join(f"[{p}] {a}..{max(a, b) - 1}" if b > a else f"[{p}] none" for p, (a, b) in result.ranges.items())
    text = f"exported {result.lines} records of {topic} ({ranges}) to {file}"
    notes = {
        "tombstone": "tombstones left out (no event)",
        "key_mismatch": "left out: key is not the event's subject (the processor rejects them as key_mismatch)",
        "reencoded": "re-encoded on one line",
        "blank": f"blank values written as {BLANK.decode()!r} (the processor dead-lettered them: invalid_json)",
    }
    return text + "".join(f"; {n} {notes[why]}" for why, n in result.skipped.items())


@app.command("export")
@settings_options(["bootstrap_servers"])
def export_command(
    file: Annotated[str, typer.Argument(help="Output file of JSON lines, or - for stdout.")],
    topic: Annotated[str | None, Opt(help="Topic to export (default: the input topic, ckptlog.events).")] = None,
    from_: Annotated[str | None, Opt("--from", help="First offset (every partition) or ISO 8601 time.")] = None,
    to: Annotated[str | None, Opt("--to", help="Stop before this offset (every partition) or time.")] = None,
    partition: Annotated[list[int] | None, Opt(help="Only this partition (repeatable).")] = None,
    *,
    settings: ServiceSettings,
) -> None:
    """Write the input log (read_committed, the processor's own records included) as JSON lines for `ckptlog fold`."""
    import asyncio

    from ckptlog.client.connect import require_bootstrap
    from ckptlog.events.codec import DecodeLimits

    with cli_errors():
        start, stop = parse_bound(from_, "--from"), parse_bound(to, "--to")
        register_secrets(settings.secrets())  # masked in whatever this command writes to stderr
        conn = settings.connection(require_bootstrap(settings.bootstrap_servers))
        name, limits = topic or settings.input_topic, DecodeLimits(settings.max_payload_bytes, settings.max_depth)
        if file == "-":
            result = asyncio.run(export(conn, name, sys.stdout.buffer, start, stop, partition, limits))
        else:
            with open(file, "wb") as out:
                result = asyncio.run(export(conn, name, out, start, stop, partition, limits))
    echo_err(summary(result, name, file))
