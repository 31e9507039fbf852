"""`ckptlog rejections [RUN]`: the events the processor rejected, read back from its dead-letter topic.

A rejected event is acknowledged by the broker like any other (the sender gets its `SentEvent`,
exit 0): the rejection exists only in the processor's log and the DLQ. This command reads the DLQ
from its beginning to its end (read_committed) and prints, per rejected event, when, the reason
code, the message (what to fix) and where the original record is (`topic[partition]@offset`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ckptlog.cli.errors import cli_errors
from ckptlog.cli.main import app
from ckptlog.cli.options import settings_options
from ckptlog.processor.redaction import register_secrets

if TYPE_CHECKING:  # rich and the client library load when the command runs (issue 38 item 8)
    from rich.console import RenderableType
    from rich.table import Table

    from ckptlog.client.dead_letters import DeadLetter
    from ckptlog.client.event_warnings import EventWarning
    from ckptlog.processor.service.settings import ServiceSettings

Opt = typer.Option


WIDE = 120  # narrower consoles get one block per rejection: six folded columns at 80 are unreadable


def _event(letter: DeadLetter) -> str:
    kind = (letter.event_type or "").removeprefix("ckptlog.")
    event = f"{kind} {letter.event_id}" if letter.event_id else kind or "—"
    return f"unreadable: {letter.undecodable}" if letter.undecodable is not None else event.strip()


def render_rejections(letters: list[DeadLetter], title: str, width: int) -> RenderableType:
    """A table on a wide console, else per rejection a heading line (time, run, reason), the event
    and where it is, and the message indented below (every text plain: never markup)."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.text import Text

    if width >= WIDE:
        return rejections_table(letters, title)
    blocks: list[RenderableType] = [Text(title)]
    for letter in letters:
        head = Text(f"{letter.time or '—'}  run {letter.run_id or '—'}  ")
        head.append(letter.reason, style="bold")
        blocks += [
            Text(""),
            head,
            Padding(Text(f"{_event(letter)}  at {letter.source}"), (0, 0, 0, 2)),
            Padding(Text(letter.message), (0, 0, 0, 2)),
        ]
    return Group(*blocks)


def rejections_table(letters: list[DeadLetter], title: str) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title), title_justify="left", expand=False)
    for column in ("time", "run", "reason", "message", "event", "source"):
        table.add_column(column, overflow="fold")
    for letter in letters:
        cells = (letter.time or "—", letter.run_id or "—", letter.reason, letter.message, _event(letter), letter.source)
        table.add_row(*map(Text, cells))  # plain text: a message from the topic is never markup
    return table


def print_warnings(found: list[EventWarning], run_id: str | None, topic: str, as_json: bool) -> None:
    """`rejections --warnings`: one row (or JSON object) per warning, in log order."""
    if as_json:
        for w in found:
            sys.stdout.write(json.dumps(dataclasses.asdict(w)) + "\n")
        return
    whose = f"run {run_id!r}" if run_id is not None else "any run"
    if not found:
        typer.echo(f"no warnings of {whose} on {topic}")
        return
    from rich.console import Console

    console = Console()
    console.print(render_warnings(found, f"{len(found)} warning(s) of {whose} on {topic}", console.width))


def render_warnings(found: list[EventWarning], title: str, width: int) -> RenderableType:
    """As `render_rejections`: a table on a wide console, else a block per warning (plain text)."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    if width >= WIDE:
        table = Table(title=Text(title), title_justify="left", expand=False)
        for column in ("run", "code", "message", "checkpoint", "caused by"):
            table.add_column(column, overflow="fold")
        for w in found:
            cells = (w.run_id, w.code, w.message, w.checkpoint_path or "—", f"{w.topic}[{w.partition}]@{w.offset}")
            table.add_row(*map(Text, cells))
        return table
    blocks: list[RenderableType] = [Text(title)]
    for w in found:
        head = Text(f"run {w.run_id}  ")
        head.append(w.code, style="bold")
        where = Text(f"{w.checkpoint_path or '—'}  caused by {w.topic}[{w.partition}]@{w.offset}")
        blocks += [Text(""), head, Padding(where, (0, 0, 0, 2)), Padding(Text(w.message), (0, 0, 0, 2))]
    return Group(*blocks)


@app.command("rejections")
@settings_options(["bootstrap_servers", "dlq_topic"])
def rejections_command(
    run_id: Annotated[str | None, typer.Argument(help="Only this run's rejections (default: every run's).")] = None,
    as_json: Annotated[bool, Opt("--json", help="One JSON object per rejection, with the original bytes.")] = False,
    last: Annotated[int | None, Opt(min=1, help="Only the newest N (per DLQ partition order).")] = None,
    warnings: Annotated[
        bool, Opt("--warnings", help="List the warnings applied events caused instead (from the checkpoints topic).")
    ] = False,
    *,
    settings: ServiceSettings,
) -> None:
    """List rejected events (reason, message, source topic[partition]@offset) from the dead-letter topic."""
    import asyncio

    from rich.console import Console

    from ckptlog.client.connect import require_bootstrap
    from ckptlog.client.dead_letters import read_dead_letters
    from ckptlog.client.event_warnings import read_warnings
    from ckptlog.events.codec import DecodeLimits

    with cli_errors():
        register_secrets(settings.secrets())  # masked in whatever this command writes to stderr
        conn = settings.connection(require_bootstrap(settings.bootstrap_servers))
        if warnings:
            found = asyncio.run(read_warnings(conn, settings.checkpoints_topic, run_id))
            return print_warnings(found[-last:] if last else found, run_id, settings.checkpoints_topic, as_json)
        limits = DecodeLimits(settings.max_payload_bytes, settings.max_depth)
        letters = asyncio.run(read_dead_letters(conn, settings.dlq_topic, run_id, limits))
    letters.sort(key=lambda d: (d.timestamp or 0, d.dlq_partition, d.dlq_offset))
    if last is not None:
        letters = letters[-last:]
    if as_json:
        for letter in letters:
            sys.stdout.write(json.dumps(letter.to_json(), allow_nan=True) + "\n")
        return
    whose = f"run {run_id!r}" if run_id is not None else "any run"
    if not letters:
        typer.echo(f"no rejections of {whose} on {settings.dlq_topic}")
        return
    console = Console()
    title = f"{len(letters)} rejection(s) of {whose} on {settings.dlq_topic}"
    console.print(render_rejections(letters, title, console.width))
