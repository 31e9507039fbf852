"""Client commands: `report`, `start-run`, `worker-group-restart` (for shell scripts) and `watch`
(a live table); `evaluate`, a validation worker, is ckptlog/cli/evaluate.py. Thin shells over the
`ckptlog` library.

Senders print the id of each acknowledged event on stdout, one per line; errors go to stderr
as one line and exit 1 (2 for bad flags, or no Kafka configured: clients never start a broker).
Every sender (these, `finish`, `reopen`, `forget`, `adopt-ray`) takes `connection_options` and
`sender_options`, the one block of --topic and --confirm flags (`Sending`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from ckptlog.cli.errors import cli_errors
from ckptlog.cli.main import app
from ckptlog.cli.options import fields_of, options_block, rule_options, settings_options
from ckptlog.errors import ConfigError

if TYPE_CHECKING:  # the commands import the client library when they run, not for --help (issue 38 item 8)
    from ckptlog.client.reporter import AsyncReporter, SentEvent
    from ckptlog.processor.service.settings import ServiceSettings

T = TypeVar("T")
Opt = typer.Option
connection_options = settings_options(fields_of(["connection", "clients"]))
"""The connection flags of `ckptlog run` (--bootstrap-servers, --security-protocol, --sasl-*, --ssl-*, and
--config / CKPTLOG_* as for run), plus --delivery-timeout-s: the command gets `settings=`, its connection."""
EventsTopic = Annotated[
    str | None, Opt(help="Input topic the processor consumes (default: the input_topic setting, ckptlog.events).")
]
StateTopic = Annotated[str | None, Opt(help="Compacted state topic (default: the state_topic setting, ckptlog.state).")]
RunArg = Annotated[str, typer.Argument(help="Run id (the Kafka key).")]
Keep = Annotated[int | None, Opt("--keep", help="num_to_keep (default: keep every checkpoint).")]
ScoreAttr = Annotated[str | None, Opt(help="Metric that ranks checkpoints (nested: val/loss).")]
ScoreOrder = Annotated[str, Opt(help="max or min.")]
ValKwargs = Annotated[str | None, Opt(help="Evaluator fn_kwargs as a JSON object; implies --validate.")]
ValTimeout = Annotated[float | None, Opt(help="Evaluator time limit in seconds; implies --validate.")]
DefaultValKwargs = Annotated[
    str | None, Opt("--validate-kwargs", help="Default evaluator fn_kwargs (JSON object) of the run's reports.")
]
DefaultValTimeout = Annotated[
    float | None, Opt("--validate-timeout-s", help="Default evaluator time limit in seconds of the run's reports.")
]
Confirm = Annotated[
    bool,
    Opt(
        "--confirm",
        help="Wait until the processor committed the event; exit 1 with its reason if it rejected it.",
    ),
]
ConfirmTimeout = Annotated[float, Opt(help="With --confirm: how long to wait for the processor.")]
ProcessorGroup = Annotated[
    str | None, Opt(help="With --confirm: the processor's consumer group (default: the group_id setting, ckptlog).")
]
DlqTopic = Annotated[
    str | None, Opt(help="With --confirm: the processor's dead-letter topic (default: the dlq_topic setting).")
]


@dataclass(frozen=True, slots=True)
class Sending:
    """Where a command sends its input events, and whether it waits for the processor's verdict: the
    flags every sending command takes, declared once (`sender_options` gives a command these flags
    and calls it with `send=` one of these)."""

    topic: EventsTopic = None
    confirm: Confirm = False
    confirm_timeout_s: ConfirmTimeout = 60.0
    processor_group: ProcessorGroup = None
    dlq_topic: DlqTopic = None

    def reporter(self, run_id: str, settings: ServiceSettings, **options: Any) -> AsyncReporter:
        """The run's AsyncReporter, sending to the events topic with these --confirm flags; `options`:
        the command's own (report ids, generation, state topic)."""
        from ckptlog.client.reporter import AsyncReporter

        return AsyncReporter(
            run_id,
            connection=settings,
            topic=setting(self.topic, settings, "input_topic"),
            **options,
            **confirming(self.confirm, self.confirm_timeout_s, self.processor_group, self.dlq_topic, settings),
        )


sender_options = options_block(Sending, "send")
"""--topic, --confirm, --confirm-timeout-s, --processor-group, --dlq-topic (`Sending`): the command gets `send=`.
Under `connection_options`, which gives it `settings=`."""


class UsageError(ConfigError):
    """A flag value is malformed (exit 2)."""


def _run(coro: Awaitable[T]) -> T:
    import asyncio

    async def main() -> T:
        return await coro

    with cli_errors():
        return asyncio.run(main())


def parse_metrics(pairs: list[str], as_json: str | None) -> dict[str, Any]:
    """`--metric k=v` (v read as JSON when it parses — 0.5, true, NaN — else as a string)
    merged over `--metrics-json '{...}'`."""
    metrics = _json_object(as_json, "--metrics-json") if as_json else {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--metric {pair!r} must look like name=value (e.g. --metric loss=0.25)")
        try:
            metrics[key] = json.loads(raw)
        except ValueError:
            metrics[key] = raw
    return metrics


def _json_object(text: str, flag: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{flag} is not JSON ({exc}); pass an object such as '{{\"k\": 1}}'") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} must be a JSON object, got {type(value).__name__}")
    return value


def validation_flag(validate: bool, kwargs: str | None, timeout_s: float | None) -> bool | dict[str, Any]:
    """`--validate` alone = the run's default spec; kwargs/timeout make an explicit spec."""
    if kwargs is None and timeout_s is None:
        return validate
    return {"fn_kwargs": _json_object(kwargs, "--validate-kwargs") if kwargs else {}, "timeout_s": timeout_s}


def setting(given: str | None, settings: ServiceSettings, name: str) -> str:
    """A topic or group flag, else that setting of the --config file / CKPTLOG_* environment, else its
    default: so a config file that names the processor's topics serves every command alike."""
    return given if given is not None else str(getattr(settings, name))


def confirming(
    confirm: bool, timeout_s: float, group: str | None, dlq_topic: str | None, settings: ServiceSettings
) -> dict[str, Any]:
    """AsyncReporter keyword arguments for the --confirm flags; the warnings come from the
    checkpoints topic of the settings (a --config file's, CKPTLOG_CHECKPOINTS_TOPIC)."""
    group, dlq_topic = setting(group, settings, "group_id"), setting(dlq_topic, settings, "dlq_topic")
    return {
        "confirm": confirm,
        "confirm_timeout_s": timeout_s,
        "processor_group": group,
        "dlq_topic": dlq_topic,
        "checkpoints_topic": settings.checkpoints_topic,
    }


def _print(sent: SentEvent, said: Sequence[str] = ()) -> None:
    """The event id on stdout; where it went and (--confirm) the processor's warnings on stderr, but
    for those of a code the client already warned about (`said`)."""
    typer.echo(sent.event_id)
    typer.echo(f"sent {sent.type} run={sent.run_id} to {sent.topic}[{sent.partition}]@{sent.offset}", err=True)
    for warning in sent.warnings:  # --confirm: applied, but the processor warned about it
        if warning.code not in said:
            typer.echo(f"warning {warning.code}: {warning.message}", err=True)


async def _start_run(
    reporter: AsyncReporter,
    storage_path: str,
    keep: int | None,
    attr: str | None,
    order: str,
    validation: bool | dict[str, Any],
    **beyond: Any,
) -> None:
    """run_started; `beyond`: the retention rules' fields (ckptlog/events/retention_rules.py)."""
    if order not in ("max", "min"):
        raise UsageError(f"--score-order must be max or min (got {order!r})")
    _print(
        await reporter.run_started(
            storage_path,
            keep,
            attr,
            order,  # type: ignore[arg-type]
            validation if validation is not True else {},
            **beyond,
        )
    )


@app.command("report")
@connection_options
@sender_options
def report_command(
    run_id: RunArg,
    metric: Annotated[list[str], Opt("--metric", "-m", help="name=value; repeatable.")] = [],  # noqa: B006
    metrics_json: Annotated[str | None, Opt(help="All metrics as one JSON object.")] = None,
    checkpoint: Annotated[str | None, Opt(help="Checkpoint directory (URL or absolute path).")] = None,
    validate: Annotated[bool, Opt("--validate", help="Ask an evaluator to validate the checkpoint.")] = False,
    validate_kwargs: ValKwargs = None,
    validate_timeout_s: ValTimeout = None,
    generation: Annotated[int | None, Opt(help="Worker-group generation of the sender.")] = None,
    index: Annotated[
        int | None,
        Opt(
            help="Report index within the generation; makes the id "
            "(run, generation, index), so loops can repeat identical reports."
        ),
    ] = None,
    event_id: Annotated[str | None, Opt(help="Use this event id as is.")] = None,
    start: Annotated[
        str | None,
        Opt("--start", help="Also send run_started with this storage path first (identical repeats are no-ops)."),
    ] = None,
    keep: Keep = None,
    score_attribute: ScoreAttr = None,
    score_order: ScoreOrder = "max",
    state_topic: Annotated[
        str | None, Opt(help="Where the run's score attribute is read to check --metric names (default: the setting).")
    ] = None,
    strict: Annotated[
        bool,
        Opt(
            "--strict",
            help="A warning is an error (exit 1): a report lacking the run's score attribute is not sent; "
            "with --confirm, one the processor applied with a warning fails too.",
        ),
    ] = False,
    *,
    send: Sending,
    settings: ServiceSettings,
) -> None:
    """Report metrics (and a checkpoint) for RUN. Without --index the id hashes the report, so
    re-running the same command is harmless. A checkpoint's metrics lacking the run's score
    attribute (its VIEW's) warn, naming the closest metric."""
    from ckptlog.cli.strict import score_checked, strict_check

    async def main() -> None:
        metrics = parse_metrics(metric, metrics_json)
        spec = validation_flag(validate, validate_kwargs, validate_timeout_s)
        state = setting(state_topic, settings, "state_topic")
        async with send.reporter(run_id, settings, report_ids="content", state_topic=state) as reporter:
            if start is not None:
                await _start_run(reporter, start, keep, score_attribute, score_order, False)
            with score_checked(strict) as said:
                sent = await reporter.report(metrics, checkpoint, spec, generation, index=index, event_id=event_id)
            _print(sent, said)
            strict_check(sent, strict)

    _run(main())


@app.command("start-run")
@connection_options
@sender_options
@rule_options
def start_run_command(
    run_id: RunArg,
    storage_path: Annotated[str, typer.Argument(help="The run's root (URL or absolute path).")],
    keep: Keep = None,
    score_attribute: ScoreAttr = None,
    score_order: ScoreOrder = "max",
    validate_kwargs: DefaultValKwargs = None,
    validate_timeout_s: DefaultValTimeout = None,
    *,
    rules: dict[str, Any],
    send: Sending,
    settings: ServiceSettings,
) -> None:
    """Send run_started: the run's storage root, retention (Ray's, and the rules beyond it) and
    default validation spec."""

    async def main() -> None:
        spec = validation_flag(False, validate_kwargs, validate_timeout_s)
        async with send.reporter(run_id, settings) as reporter:
            await _start_run(reporter, storage_path, keep, score_attribute, score_order, spec, **rules)

    _run(main())


@app.command("worker-group-restart")
@connection_options
@sender_options
def restart_command(
    run_id: RunArg,
    num_workers: Annotated[int, Opt(help="Workers in the new group.")],
    reason: Annotated[str | None, Opt(help="Why the group restarted.")] = None,
    generation: Annotated[
        int | None, Opt(help="The run's current generation (default: read from the run's view on the state topic).")
    ] = None,
    state_topic: StateTopic = None,
    *,
    send: Sending,
    settings: ServiceSettings,
) -> None:
    """Start a new worker group: generation + 1, report index back to 0."""
    from ckptlog import AsyncReader, Topics

    async def main() -> None:
        current = generation
        if current is None:
            async with AsyncReader(
                connection=settings, topics=Topics(state=setting(state_topic, settings, "state_topic"))
            ) as reader:
                view = await reader.view(run_id)
            current = view.generation if view is not None else 0
        async with send.reporter(run_id, settings, generation=current) as reporter:
            _print(await reporter.worker_group_restart(num_workers, reason))

    _run(main())


WATCH_LIMIT = 20  # kept checkpoints `watch` shows: a run keeping every one of 1,000 would not fit a terminal


@app.command("watch")
@connection_options
def watch_command(
    run_id: RunArg,
    score_attribute: ScoreAttr = None,
    once: Annotated[bool, Opt("--once", help="Print the current view and exit.")] = False,
    limit: Annotated[
        int,
        Opt("--limit", help="Show the N best-ranked kept checkpoints, and the latest; a row counts the rest (0: all)."),
    ] = WATCH_LIMIT,
    state_topic: StateTopic = None,
    dlq_topic: Annotated[
        str | None, Opt(help="Dead-letter topic (its rejections of RUN are counted; default: the dlq_topic setting).")
    ] = None,
    checkpoints_topic: Annotated[
        str | None, Opt(help="Checkpoints topic (its warnings about RUN are counted; default: the setting).")
    ] = None,
    *,
    settings: ServiceSettings,
) -> None:
    """Live table of RUN's kept checkpoints (status, score, ★ best, ● latest) and its rejected
    events, until Ctrl-C; without a terminal, one plain line per change."""
    from rich.console import Console

    from ckptlog import Topics
    from ckptlog.cli.watching import watch

    topics = Topics(state=setting(state_topic, settings, "state_topic"))
    dlq, checkpoints = (
        setting(dlq_topic, settings, "dlq_topic"),
        setting(checkpoints_topic, settings, "checkpoints_topic"),
    )
    try:
        _run(watch(Console(), run_id, score_attribute, once, settings, topics, dlq, checkpoints, limit=limit))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
