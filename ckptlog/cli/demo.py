"""`ckptlog demo`: the README's main command — the whole system on one machine, checked.

Uses $KAFKA_BOOTSTRAP_SERVERS, else starts (or reuses) the default local broker, which keeps
running afterwards (it says so, and how to stop it); runs the processor and an evaluator
in-process, a simulated training job of several runs, and shows each run's checkpoints live;
it exits 0 only when the views equal an offline fold of the log and the disk agrees
(ckptlog.demo.checks).
"""

from __future__ import annotations

import logging
import shlex
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ckptlog.broker import ensure_bootstrap
from ckptlog.cli.main import app
from ckptlog.errors import CkptlogError
from ckptlog.kafka.discovery import configured_bootstrap
from ckptlog.processor.invocation import activation_hint, ckptlog_command
from ckptlog.processor.ui import console_command

if TYPE_CHECKING:  # the demo (processor, clients, rich) loads when it runs, not for its --help (issue 38 item 8)
    from rich.console import Console

    from ckptlog.demo import DemoOptions, DemoResult
    from ckptlog.demo.display import DemoState

Opt = typer.Option


def _log_to(path: Path) -> None:
    """The processor's and evaluator's logs go to a file: the terminal belongs to the table."""
    from ckptlog.processor.service.logs import KeyValueFormatter

    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    logging.getLogger("aiokafka").setLevel(logging.WARNING)


async def _narrate(console: Console, holder: list[DemoState]) -> None:
    """--no-live: one line per phase, for CI logs."""
    import asyncio

    said = ""
    while True:
        if holder and not said:
            console.print(holder[-1].console, markup=False, highlight=False, soft_wrap=True)
        if holder and holder[-1].phase != said:
            said = holder[-1].phase
            console.print(f"[{holder[-1].elapsed:5.1f}s] {said}")
        await asyncio.sleep(0.1)


async def _show(options: DemoOptions, console: Console, live: bool) -> DemoResult:
    """Run the demo under a live dashboard, or narrated and printed once at the end."""
    import asyncio

    from rich.console import RenderableType
    from rich.live import Live
    from rich.text import Text

    from ckptlog.demo import run_demo
    from ckptlog.demo.display import dashboard

    holder: list[DemoState] = []
    if live:

        def current() -> RenderableType:
            return dashboard(holder[-1]) if holder else Text("starting …")

        with Live(get_renderable=current, console=console, refresh_per_second=8):
            return await run_demo(options, holder.append)
    narrator = asyncio.create_task(_narrate(console, holder))
    try:
        result = await run_demo(options, holder.append)
    finally:
        narrator.cancel()
    console.print(dashboard(result.state))
    return result


@app.command("demo")
def demo_command(
    live: Annotated[bool, Opt("--live/--no-live", help="Live table (default: only when stdout is a TTY).")] = True,
    runs: Annotated[int, Opt(min=1, max=9, help="Training runs.")] = 3,
    reports: Annotated[int, Opt(min=1, max=500, help="Reports per run.")] = 30,
    seed: Annotated[int, Opt(help="Seed of metrics and evaluator scores.")] = 7,
    pace_s: Annotated[float, Opt(min=0.0, help="Mean pause between reports.")] = 0.12,
    clean: Annotated[
        bool,
        Opt(
            "--clean",
            help="Delete the demo's topics and files when it ends (default: keep them to explore, until the "
            "next demo replaces them; kept anyway when a check failed).",
        ),
    ] = False,
    bootstrap_servers: Annotated[
        str | None,
        Opt(help="Kafka host:port list (default: $KAFKA_BOOTSTRAP_SERVERS, else the local broker, started if needed)."),
    ] = None,
) -> None:
    """Run processor + evaluator + a simulated training job end to end and check the result."""
    local = configured_bootstrap(bootstrap_servers) is None
    try:  # before the live table: a first start fetches the broker jars, with progress on stderr
        bootstrap = ensure_bootstrap(bootstrap_servers)
    except CkptlogError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    try:
        _demo(bootstrap, runs, reports, seed, pace_s, clean, live)
    finally:  # the live table may have pushed ensure_bootstrap's note off the screen
        if local:
            stop = f"{ckptlog_command()} broker stop"
            typer.echo(f"the local Kafka broker on {bootstrap} is still running; stop it with `{stop}`", err=True)


def explore_text(result: DemoResult) -> str:
    """The commands that look at what the demo left, each runnable as printed (ckptlog.processor.invocation:
    the script's path when `ckptlog` is not on the PATH), and every one reading the demo's --config
    file."""
    program, config = ckptlog_command(), shlex.quote(str(result.config))
    run = shlex.quote(next(iter(result.state.runs), "RUN"))
    activate = activation_hint()
    return "\n".join(
        [
            f"the demo's topics and files stay (in {result.workdir}; demo.log has the processor's log) until the "
            "next demo replaces them; explore its runs with:",
            f"  {program} inspect --config {config}",
            f"  {program} watch {run} --config {config}",
            f"  {program} history {run} --config {config}",
            f"  {program} rejections --config {config}",
            f"  {console_command(config, program=program)}",
            *([f"(ckptlog is not on your PATH: `{activate}` puts it there)"] if activate else []),
        ]
    )


def _demo(bootstrap: str, runs: int, reports: int, seed: int, pace_s: float, clean: bool, live: bool) -> None:
    """The demo proper, once the broker answers: exit 0 only when every check passed."""
    import asyncio

    from rich.console import Console

    from ckptlog.demo import DemoOptions
    from ckptlog.demo.display import summary

    console = Console()
    workdir = Path(tempfile.mkdtemp(prefix="ckptlog-demo-"))
    _log_to(workdir / "demo.log")
    options = DemoOptions(bootstrap, runs, reports, seed, pace_s, clean=clean, workdir=workdir)
    try:
        result = asyncio.run(_show(options, console, live and console.is_terminal))
    except CkptlogError as exc:
        typer.echo(f"error: {exc} (files and logs kept in {workdir})", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo(f"interrupted (files kept in {workdir})", err=True)
        raise typer.Exit(130) from None
    console.print(summary(result.state, result.report))
    if result.kept:
        console.print(explore_text(result), highlight=False, soft_wrap=True)
    if not result.report.ok:
        raise typer.Exit(1)
