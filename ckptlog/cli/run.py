"""`ckptlog run`: the stream processor (see docs/processor.md)."""

from __future__ import annotations

import io
import logging
import signal
from typing import TYPE_CHECKING

import typer

from ckptlog.cli.errors import echo_err
from ckptlog.cli.main import app
from ckptlog.cli.options import fields_of, settings_options
from ckptlog.cli.setting_flags import FLAGS
from ckptlog.errors import CkptlogError

if TYPE_CHECKING:  # the processor loads when the command runs, not for its --help (issue 38 item 8)
    from ckptlog.processor.service.settings import ServiceSettings

log = logging.getLogger("ckptlog.cli.run")


def dump_tasks() -> None:
    """SIGUSR1: log the stack of every asyncio task (where is it waiting?)."""
    import asyncio

    for task in asyncio.all_tasks():
        stream = io.StringIO()
        task.print_stack(file=stream)
        log.warning("event=task_dump task=%s\n%s", task.get_name(), stream.getvalue())


async def serve(settings: ServiceSettings) -> None:
    """Run the processor until SIGTERM/SIGINT, then finish the batch, commit, snapshot and return."""
    import asyncio

    from ckptlog.processor.service.processor import Processor, tune_gc

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
@settings_options(f for f in FLAGS if f not in fields_of(["clients"]))
def run_command(*, settings: ServiceSettings) -> None:
    """Run the stream processor: consume events, publish checkpoint events, views and watermarks.

    Every setting is also a CKPTLOG_* environment variable (CKPTLOG_STORAGE_ROOT, ...) and a key
    of the --config file; flags win over the environment, which wins over the file. Secrets
    (CKPTLOG_SASL_PLAIN_PASSWORD, the storage options) are read from the environment or the file
    only. docs/processor.md, Settings, lists them all."""
    import asyncio

    from ckptlog.processor.service.logs import configure_logging

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
