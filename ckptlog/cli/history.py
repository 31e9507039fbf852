"""`ckptlog history RUN` and `ckptlog explain RUN PATH`: every decision about a run, replayed from
its input partition (contract §10); `inspect --as-of` reads through `as_of` here too."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ckptlog.cli.errors import cli_errors, echo_err
from ckptlog.cli.main import app
from ckptlog.cli.options import fields_of, settings_options
from ckptlog.errors import ConfigError
from ckptlog.processor.redaction import register_secrets

if TYPE_CHECKING:  # the replay's modules load when a command runs, not for its --help (issue 38 item 8)
    from ckptlog.kafka.records import PartitionId
    from ckptlog.processor.explain.source import Moment, Replayed
    from ckptlog.processor.explain.source import Progress as OnProgress
    from ckptlog.processor.explain.story import Step
    from ckptlog.processor.service.settings import ServiceSettings

GROUPS = ("connection", "topics", "fold", "snapshots")
Opt = typer.Option


def parse_moment(text: str | None, flag: str) -> Moment | None:
    """`123` (an offset of the run's input partition) or an ISO 8601 time (UTC unless it says)."""
    if text is None:
        return None
    if text.strip().isascii() and text.strip().isdigit():  # not '²' or '١٢': str.isdigit takes those too
        return int(text)
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"{flag} {text!r}: give an input offset (123) or an ISO 8601 time (2026-12-02T10:00:00Z)"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.now().astimezone().tzinfo)


def require_text(value: str, what: str) -> str:
    """`value` as given, or a ConfigError when it is not text: bytes that are not UTF-8 (the shell
    passes them as surrogates) can be no Kafka key, no event's subject and no checkpoint path."""
    try:
        value.encode()
    except UnicodeEncodeError:
        shown = value.encode("utf-8", "backslashreplace").decode()
        raise ConfigError(f"{what} {shown!r} is not UTF-8 text; give it as the run reported it") from None
    return value


@contextmanager
def progress_bar() -> Iterator[OnProgress]:
    """A progress bar on stderr for a long replay (a terminal only; nothing when piped)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    columns = (TextColumn("replaying {task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        tasks: dict[PartitionId, Any] = {}

        def update(pid: PartitionId, position: int, begin: int, end: int) -> None:
            if pid not in tasks:
                tasks[pid] = bar.add_task(str(pid), total=max(0, end - begin))
            bar.update(tasks[pid], completed=max(0, position - begin))

        yield update


def _effect_text(effect: dict[str, Any]) -> str:
    from ckptlog.events.numbers import number_text
    from ckptlog.events.outputs import WARNING, WATERMARK
    from ckptlog.processor.explain.story import DELETION_REFUSED

    kind, path = effect["kind"], effect.get("path")
    if kind == "evicted":
        r = effect["reason"]
        score = "" if r["score"] is None else f", score {number_text(r['score'])}"
        return f"evicted {path} (rank {r['rank']} by {r['order']}, num_to_keep {r['num_to_keep']}{score})"
    if kind == "registered":
        preserved = f", preserved by {effect['preserved']}" if "preserved" in effect else ""
        return f"registered {path} ({effect['status']}{preserved})"
    if kind == "status_changed":
        return f"{path} {effect['previous_status']} -> {effect['status']}"
    if kind == "rejected":
        return f"rejected ({effect['reason']}): {effect['message']}"
    if kind in (WARNING.name, DELETION_REFUSED):
        return f"{kind} {effect.get('code', '')} {effect['message']}".replace("  ", " ")
    if kind == WATERMARK.name:
        return f"committed={effect['committed']} validated={effect['validated']}"
    if kind == "started":
        return f"started, root {effect['storage_path']}"
    if kind == "restart":
        return f"restart: generation {effect['generation']}"
    return f"{kind} {path}" if path is not None else kind


_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")


def _printable(text: str) -> str:
    """Control characters (an event id may hold any) as escapes: no terminal sequence reaches the screen."""
    return _CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


def step_line(step: Step) -> str:
    effects = "; ".join(_effect_text(e) for e in step.effects) or "no effect"
    kind = (step.type or "undecodable").removeprefix("ckptlog.")
    return _printable(f"@{step.offset} {step.time or '-'} {kind} {step.id or '-'}: {effects}")


@app.command("history")
@settings_options(fields_of(GROUPS))
def history_command(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    as_json: Annotated[bool, Opt("--json", help="JSON lines: offset, id, type, time, effects.")] = False,
    from_: Annotated[str | None, Opt("--from", help="First input offset or time to show.")] = None,
    to: Annotated[str | None, Opt("--to", help="Last input offset or time to show (the replay stops there).")] = None,
    *,
    settings: ServiceSettings,
) -> None:
    """The run's story in log order: each input event that touched it and what it did (registered,
    status changed, evicted and why, deleted, refused, restart, warning, rejection)."""
    import asyncio

    from ckptlog.client.connect import require_bootstrap
    from ckptlog.processor.explain.source import elsewhere, history_of, offset_from

    with cli_errors():
        register_secrets(settings.secrets())
        require_text(run_id, "run id")
        conn = settings.connection(require_bootstrap(settings.bootstrap_servers))
        first, last = parse_moment(from_, "--from"), parse_moment(to, "--to")
        if _backwards(first, last):
            raise ConfigError(f"--from {from_} is after --to {to}: nothing is between them; swap them")
        with progress_bar() as progress:
            replayed = asyncio.run(history_of(conn, settings, run_id, last, progress))
            start = (
                0
                if first is None
                else asyncio.run(offset_from(conn, settings.input_topic, replayed.pid.partition, first))
            )
    steps = [s for s in replayed.replay.steps[run_id] if s.offset >= start]
    for step in steps:
        sys.stdout.write((json.dumps(step.to_json(), allow_nan=True) if as_json else step_line(step)) + "\n")
    _note_start(replayed)
    if not replayed.replay.steps[run_id]:
        if (retired := _retired(run_id, replayed)) is not None:
            echo_err(f"error: run {run_id!r} {retired}")
            raise typer.Exit(1)
        if last is not None:
            echo_err(f"error: run {run_id!r} has no events in {replayed.pid} up to --to {to}; try a later --to")
            raise typer.Exit(1)
        with cli_errors():
            others = asyncio.run(elsewhere(conn, settings, run_id, replayed.pid.partition))
        echo_err(
            f"error: run {run_id!r} has no events in {replayed.pid} (its partition by run id); {_where(run_id, others)}"
        )
        raise typer.Exit(1)


def _backwards(first: Moment | None, last: Moment | None) -> bool:
    """--from after --to (two offsets, or two times; an offset and a time are not compared)."""
    if isinstance(first, int) and isinstance(last, int):
        return first > last
    return isinstance(first, datetime) and isinstance(last, datetime) and first > last


def _where(run_id: str, others: list[Replayed]) -> str:
    """Where else the run's events are (`elsewhere`), or "check the run id"."""
    if not others:
        return "check the run id"
    places = []
    for other in others:
        offsets = [str(step.offset) for step in other.replay.steps[run_id]]
        places.append(
            f"{other.pid} has {len(offsets)} (offsets {', '.join(offsets[:5])}{', ...' * (len(offsets) > 5)})"
        )
    return (
        f"but {'; '.join(places)}: produced without the run id as key, or to an explicit partition, so the "
        "processor folded them there as a separate state of the run; produce every event of a run with key = run id"
    )


def _note_start(replayed: Replayed) -> None:
    if replayed.snapshot is not None:
        echo_err(
            f"note: {replayed.pid} starts at offset {replayed.snapshot} (retention deleted the records before it): "
            "the history shown begins at the snapshot there"
        )


@app.command("explain")
@settings_options(fields_of(GROUPS))
def explain_command(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    path: Annotated[str, typer.Argument(help="The checkpoint path, as reported (any spelling the fold accepts).")],
    as_json: Annotated[bool, Opt("--json", help="The explanation as one JSON document.")] = False,
    *,
    settings: ServiceSettings,
) -> None:
    """One checkpoint's state now (kept, latest, pending, preserved, evicted, deleted,
    deletion_refused or unknown) and why: the events that reported and evicted it."""
    import asyncio

    from ckptlog.client.connect import require_bootstrap
    from ckptlog.processor.explain.checkpoint import explain, paragraph
    from ckptlog.processor.explain.source import elsewhere, history_of

    with cli_errors():
        register_secrets(settings.secrets())
        require_text(run_id, "run id")
        require_text(path, "checkpoint path")
        conn = settings.connection(require_bootstrap(settings.bootstrap_servers))
        with progress_bar() as progress:
            replayed = asyncio.run(history_of(conn, settings, run_id, None, progress))
    replay = replayed.replay
    doc = explain(run_id, path, replay.steps[run_id], replay.state(run_id))
    if as_json or doc["state"] != "unknown":  # unknown: the error line below says it, once
        sys.stdout.write((json.dumps(doc, allow_nan=True) if as_json else paragraph(doc)) + "\n")
    _note_start(replayed)
    if doc["state"] == "unknown":
        why = _why_unknown(run_id, doc, replay.steps[run_id], replayed)
        if doc["reported"] is None:
            with cli_errors():
                others = asyncio.run(elsewhere(conn, settings, run_id, replayed.pid.partition))
            why += _reported_elsewhere(run_id, path, others)
        echo_err(f"error: checkpoint {path!r} is unknown: run {run_id!r} {why}")
        raise typer.Exit(1)


def _reported_elsewhere(run_id: str, path: str, others: list[Replayed]) -> str:
    from ckptlog.processor.explain.checkpoint import explain

    for other in others:
        found = explain(run_id, path, other.replay.steps[run_id], other.replay.state(run_id))
        if found["reported"] is not None:
            at = f"event {found['reported']['id']!r} at offset {found['reported']['offset']} of {other.pid}"
            return (
                f"; but {at} reported it ({found['state']} there): it was produced without the run id as key (or "
                "to an explicit partition), so the processor folded it there as a separate state of the run; "
                "produce every event of a run with key = run id"
            )
    return ""


def _retired(run_id: str, replayed: Replayed) -> str | None:
    """Why a run with no events replayed is known anyway: the snapshot the replay started from
    (retention deleted the log below it) remembers that it finished, and nothing else."""
    if replayed.snapshot is None or run_id not in replayed.replay.fold.finished:
        return None
    return (
        f"finished (or was forgotten) and left the processor's state before offset {replayed.snapshot} of "
        f"{replayed.pid}, where the replay starts: retention deleted its events, and the snapshot there remembers "
        f"only that it finished; its final VIEW, unless it was forgotten, is on the state topic (`ckptlog inspect "
        f"{run_id}`)"
    )


def _why_unknown(run_id: str, doc: dict[str, Any], steps: list[Step], replayed: Replayed) -> str:
    forgets = [s for s in steps if any(e["kind"] == "forgotten" for e in s.effects)]
    if doc["reported"] is not None and forgets:  # reported, never evicted, its state dropped
        return (
            f"was forgotten (run_forgotten {forgets[-1].id!r} at offset {forgets[-1].offset} of {replayed.pid}): "
            "its state and VIEW are gone, so nothing keeps or deletes that path any more; `ckptlog history RUN` "
            "shows its reports"
        )
    if not steps and (retired := _retired(run_id, replayed)) is not None:
        return retired
    if not steps:
        return f"has no events in {replayed.pid} (its partition by run id); check the run id"
    refused = [h for h in doc["history"] if h["kind"] == "rejected"]
    if refused:
        return (
            f"reported that path but the processor rejected it (offset {refused[-1]['offset']} of {replayed.pid}, "
            f"{refused[-1]['reason']}: {refused[-1]['message']}); `ckptlog rejections RUN` shows every rejected event"
        )
    return f"never reported that path in {replayed.pid}; check the path (`ckptlog history RUN` lists its paths)"
