"""`ckptlog broker ...`: run a local Kafka broker without Docker.

Progress goes to stderr and the bootstrap address is the last line on stdout,
so scripts can do `BOOTSTRAP=$(ckptlog broker start | tail -n1)`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ckptlog.broker import KAFKA_VERSION, LocalBroker, fetch_jars
from ckptlog.cli.errors import cli_errors
from ckptlog.cli.main import app
from ckptlog.kafka.discovery import default_dir

broker_app = typer.Typer(
    help="Run a local single-node Kafka broker (KRaft, 127.0.0.1) for development and tests.",
    no_args_is_help=True,
)
app.add_typer(broker_app, name="broker")

DirOpt = Annotated[
    Path | None,
    typer.Option(
        "--dir",
        help="Broker directory (config, data, broker.log, broker.json). Default: ${CKPTLOG_HOME:-~/.ckptlog}/broker.",
    ),
]
VersionOpt = Annotated[str, typer.Option("--kafka-version", help="Apache Kafka 4.x version.")]


def _progress(message: str) -> None:
    typer.echo(message, err=True)


def _broker(
    dir: Path | None,
    port: int | None = None,
    kafka_version: str = KAFKA_VERSION,
    start_timeout: float = 120.0,
) -> LocalBroker:
    return LocalBroker(
        dir if dir is not None else default_dir(),
        port,
        kafka_version=kafka_version,
        start_timeout=start_timeout,
        log=_progress,
    )


@broker_app.command()
def start(
    dir: DirOpt = None,
    port: Annotated[
        int | None,
        typer.Option("--port", help="Client port. Default 9092, or a free one if that is busy."),
    ] = None,
    kafka_version: VersionOpt = KAFKA_VERSION,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the broker.")] = 120.0,
) -> None:
    """Start the broker detached (or reuse it) and print its bootstrap address."""
    with cli_errors():
        broker = _broker(dir, port=port, kafka_version=kafka_version, start_timeout=timeout)
        bootstrap = broker.start()
    _progress(f"broker running in {broker.dir}")
    typer.echo(bootstrap)


@broker_app.command()
def stop(dir: DirOpt = None) -> None:
    """Stop the broker (SIGTERM, then SIGKILL after a timeout); data is kept."""
    with cli_errors():
        broker = _broker(dir)
        stopped = broker.stop()
    typer.echo(f"stopped the broker in {broker.dir}" if stopped else f"no broker running in {broker.dir}")


@broker_app.command()
def status(dir: DirOpt = None) -> None:
    """Exit 0 if the broker runs and answers, 1 otherwise."""
    with cli_errors():
        broker = _broker(dir)
        st = broker.status()
    if st.running and st.answering:
        typer.echo(f"running: {st.bootstrap} (pid {st.pid}, log {st.log_file})")
        return
    if st.running:
        typer.echo(f"starting: pid {st.pid} does not answer on {st.bootstrap} yet (log {st.log_file})")
    else:
        typer.echo(f"not running (dir {broker.dir}); start it with `ckptlog broker start`")
    raise typer.Exit(1)


@broker_app.command()
def fetch(kafka_version: VersionOpt = KAFKA_VERSION) -> None:
    """Download and cache the Kafka server jars only (CI runs this before the tests)."""
    with cli_errors():
        cache = fetch_jars(kafka_version, log=_progress)
    _progress(f"Kafka {kafka_version} jars cached")
    typer.echo(cache.libs)
