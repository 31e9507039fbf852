"""`ckptlog finish RUN`, `ckptlog reopen RUN` and `ckptlog forget RUN`: a run's run_finished, run_reopened or
run_forgotten (contract §3)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

import typer

from ckptlog.cli.clients import RunArg, StateTopic, _print, _run, connection_options, sender_options, setting
from ckptlog.cli.main import app
from ckptlog.errors import ConfigError

if TYPE_CHECKING:
    from ckptlog.cli.clients import Sending
    from ckptlog.processor.service.settings import ServiceSettings

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
@sender_options
def finish_command(
    run_id: Annotated[str | None, typer.Argument(help="Run id (the Kafka key); or --idle-for.")] = None,
    keep: FinishKeep = "kept",
    idle_for: Annotated[
        str | None,
        typer.Option(
            "--idle-for",
            help="Instead of RUN: finish every unfinished run whose VIEW the processor has not written for this "
            "long (90s, 30m, 12h, 7d, 1d12h), read from the state topic.",
        ),
    ] = None,
    prefix: Annotated[str | None, typer.Option(help="With --idle-for: only runs whose id starts with this.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With --idle-for: list the runs, send nothing.")] = False,
    state_topic: StateTopic = None,
    *,
    send: Sending,
    settings: ServiceSettings,
) -> None:
    """Finish a run: its last retention, later reports refused (`run_finished`), its state out of the processor
    once its deletions are settled; its final VIEW stays on the state topic (`ckptlog inspect`)."""
    mode = _finish_mode(keep)
    if (run_id is None) == (idle_for is None):
        raise typer.BadParameter("give a RUN or --idle-for DURATION (not both)")
    if run_id is not None and (prefix is not None or dry_run):
        raise typer.BadParameter("--prefix and --dry-run go with --idle-for")

    async def main() -> None:
        # the idle runs' epochs come with their VIEWs; a run named alone has its VIEW read by the reporter
        runs: dict[str, int | None] = {run_id: None} if run_id is not None else {}
        if run_id is None:
            runs = await _idle(settings, state_topic, idle_for or "", prefix, dry_run)
        views = setting(state_topic, settings, "state_topic")  # the run's epoch: its VIEW's
        for run, epoch in runs.items():
            async with send.reporter(run, settings, state_topic=views) as reporter:
                _print(await reporter.finish(mode, epoch=epoch))

    _run(main())


def _finish_mode(keep: str) -> Literal["kept", "best"]:
    if keep == "kept":
        return "kept"
    if keep == "best":
        return "best"
    raise ConfigError(f"--keep {keep!r}: give `kept` or `best`")


async def _idle(
    settings: ServiceSettings, state_topic: str | None, idle_for: str, prefix: str | None, dry_run: bool
) -> dict[str, int | None]:
    """The idle runs and their epochs, said on stderr; none when --dry-run."""
    from ckptlog.cli.idle import idle_runs, idle_text, parse_duration
    from ckptlog.client.connect import require_bootstrap

    seconds = parse_duration(idle_for)
    conn = settings.connection(require_bootstrap(settings.bootstrap_servers))
    topic = setting(state_topic, settings, "state_topic")
    found = await idle_runs(conn, topic, seconds, prefix)
    verb = "would finish" if dry_run else "finishing"
    typer.echo(f"{len(found)} unfinished run(s) idle for more than {idle_for} on {topic}; {verb}:", err=True)
    for run in found:
        typer.echo(f"  {run.run_id} (idle {idle_text(run.idle_s)})", err=True)
    return {} if dry_run else {r.run_id: r.epoch for r in found}


@app.command("reopen")
@connection_options
@sender_options
def reopen_command(run_id: RunArg, state_topic: StateTopic = None, *, send: Sending, settings: ServiceSettings) -> None:
    """Reopen a finished run: its state comes back as it finished (kept checkpoints, latest, counters) and it takes
    reports again. Refused while it has not finished (`run_not_finished`), once its finished record expired or for a
    run the processor never saw (`unknown_run`), and for a forgotten run (`not_reopenable`): with --confirm, the
    reason and exit 1."""

    async def main() -> None:
        views = setting(state_topic, settings, "state_topic")  # the reopen's epoch: its VIEW's + 1
        async with send.reporter(run_id, settings, state_topic=views) as reporter:
            _print(await reporter.reopen())

    _run(main())


@app.command("forget")
@connection_options
@sender_options
def forget_command(run_id: RunArg, *, send: Sending, settings: ServiceSettings) -> None:
    """Forget a run (an abandoned one): its state leaves the processor and its VIEW is tombstoned; its checkpoints
    stay in storage. Refused (`deletions_owed`) while its deletions are not settled: send it again then."""

    async def main() -> None:
        async with send.reporter(run_id, settings) as reporter:
            _print(await reporter.forget())

    _run(main())
