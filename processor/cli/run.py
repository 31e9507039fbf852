"""`ckptlog run`: the stream processor (see docs/processor.md)."""

from __future__ import annotations

import asyncio
import io
import logging
import signal
from pathlib import Path
from typing import Annotated, Any

import typer

from processor.cli.errors import cli_errors, echo_err
from processor.cli.main import app
from processor.errors import CkptlogError
from processor.service.logs import configure_logging
from processor.service.processor import Processor, tune_gc
from processor.service.settings import ServiceSettings, load_settings

log = logging.getLogger("processor.cli.run")

Opt = typer.Option


def dump_tasks() -> None:
    """SIGUSR1: log the stack of every asyncio task (where is it waiting?)."""
    for task in asyncio.all_tasks():
        stream = io.StringIO()
        task.print_stack(file=stream)
        log.warning("event=task_dump task=%s\n%s", task.get_name(), stream.getvalue())


async def serve(settings: ServiceSettings) -> None:
    """Run the processor until SIGTERM/SIGINT, then finish the batch, commit, snapshot and return."""
    processor = Processor(settings)
    tune_gc()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, processor.stop)
    loop.add_signal_handler(signal.SIGUSR1, dump_tasks)
    try:
        await processor.run()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            loop.remove_signal_handler(sig)


@app.command("run")
def run_command(
    config: Annotated[Path | None, Opt("--config", help="TOML (.toml) or JSON file of settings.")] = None,
    bootstrap_servers: Annotated[
        str | None,
        Opt(help="Kafka host:port list (default: $KAFKA_BOOTSTRAP_SERVERS, else the local broker, started if needed)."),
    ] = None,
    snapshots: Annotated[str | None, Opt(help="fsspec URL for snapshots (default ~/.ckptlog/snapshots).")] = None,
    storage_root: Annotated[str | None, Opt(help="Default run root and outer bound for deletions.")] = None,
    default_num_to_keep: Annotated[int | None, Opt(help="num_to_keep for runs without run_started.")] = None,
    score_attribute: Annotated[str | None, Opt(help="Score metric for runs without run_started.")] = None,
    score_order: Annotated[str | None, Opt(help="max or min.")] = None,
    guarantee: Annotated[str | None, Opt(help="exactly_once (default) or at_least_once.")] = None,
    group_id: Annotated[str | None, Opt(help="Consumer group (default ckptlog).")] = None,
    group_instance_id: Annotated[str | None, Opt(help="Static group membership id (e.g. the pod name).")] = None,
    session_timeout_ms: Annotated[
        int | None,
        Opt(help="Group session timeout, 6000..1800000 ms (default 10000): how soon a dead member's partitions move."),
    ] = None,
    transactional_id_prefix: Annotated[str | None, Opt(help="Default: the group id.")] = None,
    input_topic: Annotated[str | None, Opt(help="Default ckptlog.events.")] = None,
    checkpoints_topic: Annotated[str | None, Opt(help="Default ckptlog.checkpoints.")] = None,
    validations_topic: Annotated[str | None, Opt(help="Default ckptlog.validations.")] = None,
    watermarks_topic: Annotated[str | None, Opt(help="Default ckptlog.watermarks.")] = None,
    state_topic: Annotated[str | None, Opt(help="Compacted; default ckptlog.state.")] = None,
    dlq_topic: Annotated[str | None, Opt(help="Default ckptlog.dlq.")] = None,
    topic_partitions: Annotated[int | None, Opt(help="Partitions of topics this command creates.")] = None,
    snapshot_every: Annotated[int | None, Opt(help="Snapshot every N events (default 10000).")] = None,
    snapshot_interval_s: Annotated[float | None, Opt(help="...or every T seconds (default 60).")] = None,
    keep_snapshots: Annotated[int | None, Opt(help="Snapshots kept per partition (default 3).")] = None,
    allow_data_loss: Annotated[
        bool | None,
        Opt("--allow-data-loss/--no-allow-data-loss", help="Continue from the log start if it lost offsets."),
    ] = None,
    max_payload_bytes: Annotated[int | None, Opt(help="Reject larger events (default 1 MiB).")] = None,
    max_depth: Annotated[int | None, Opt(help="Reject deeper JSON (default 64).")] = None,
    log_format: Annotated[str | None, Opt(help="console (key=value lines, the default) or json.")] = None,
    log_level: Annotated[str | None, Opt(help="DEBUG, INFO, WARNING, ...")] = None,
    metrics_port: Annotated[
        int | None, Opt(help="Serve /metrics (Prometheus), /healthz and /readyz on this port (default: off).")
    ] = None,
    metrics_host: Annotated[
        str | None, Opt(help="Address for --metrics-port (default 127.0.0.1; 0.0.0.0 for every interface).")
    ] = None,
) -> None:
    """Run the stream processor: consume events, publish checkpoint events, views and watermarks."""
    flags: dict[str, Any] = {k: v for k, v in locals().items() if k != "config"}
    with cli_errors():
        settings = load_settings(config, **flags)
    configure_logging(settings.log_format, settings.log_level, secrets=settings.secrets())
    try:
        asyncio.run(serve(settings))
    except CkptlogError as exc:
        log.critical("event=fatal error_type=%s message=%r", type(exc).__name__, str(exc))
        if settings.log_format != "json":  # JSON logs: the line above already says it, and stays one object
            echo_err(f"error: {exc}")
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
