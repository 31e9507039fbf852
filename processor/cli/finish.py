"""`ckptlog finish RUN` and `ckptlog forget RUN`: a run's run_finished or run_forgotten (contract §3)."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from ckptlog.reporter import AsyncReporter
from processor.cli.clients import (
    Confirm,
    ConfirmTimeout,
    DlqTopic,
    EventsTopic,
    ProcessorGroup,
    RunArg,
    _print,
    _run,
    confirming,
    connection_options,
    setting,
)
from processor.cli.main import app
from processor.errors import ConfigError
from processor.service.settings import ServiceSettings

FinishKeep = Annotated[
    str,
    typer.Option(
        "--keep",
        help="What the finished run keeps: `kept` (the kept set as it is) or `best` (only the best, besides the "
        "latest, pending and preserved checkpoints).",
    ),
]


@app.command("finish")
@connection_options
def finish_command(
    run_id: RunArg,
    keep: FinishKeep = "kept",
    topic: EventsTopic = None,
    confirm: Confirm = False,
    confirm_timeout_s: ConfirmTimeout = 60.0,
    processor_group: ProcessorGroup = None,
    dlq_topic: DlqTopic = None,
    *,
    settings: ServiceSettings,
) -> None:
    """Finish a run: its last retention, later reports refused (`run_finished`), its state out of the processor
    once its deletions are settled; its final VIEW stays on the state topic (`ckptlog inspect`)."""

    async def main() -> None:
        mode: Literal["kept", "best"]
        if keep == "kept":
            mode = "kept"
        elif keep == "best":
            mode = "best"
        else:
            raise ConfigError(f"--keep {keep!r}: give `kept` or `best`")
        async with AsyncReporter(
            run_id,
            connection=settings,
            topic=setting(topic, settings, "input_topic"),
            **confirming(confirm, confirm_timeout_s, processor_group, dlq_topic, settings),
        ) as reporter:
            _print(await reporter.finish(mode))

    _run(main())


@app.command("forget")
@connection_options
def forget_command(
    run_id: RunArg,
    topic: EventsTopic = None,
    confirm: Confirm = False,
    confirm_timeout_s: ConfirmTimeout = 60.0,
    processor_group: ProcessorGroup = None,
    dlq_topic: DlqTopic = None,
    *,
    settings: ServiceSettings,
) -> None:
    """Forget a run (an abandoned one): its state leaves the processor and its VIEW is tombstoned; its checkpoints
    stay in storage. Refused (`deletions_owed`) while its deletions are not settled: send it again then."""

    async def main() -> None:
        async with AsyncReporter(
            run_id,
            connection=settings,
            topic=setting(topic, settings, "input_topic"),
            **confirming(confirm, confirm_timeout_s, processor_group, dlq_topic, settings),
        ) as reporter:
            _print(await reporter.forget())

    _run(main())
