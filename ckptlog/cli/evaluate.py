"""`ckptlog evaluate`: a validation worker (ckptlog.client.evaluator) on the command line."""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING, Annotated

from ckptlog.cli.clients import EventsTopic, Opt, _run, connection_options, setting
from ckptlog.cli.main import app

if TYPE_CHECKING:  # the client library loads when the command runs (issue 38 item 8)
    from ckptlog.processor.service.settings import ServiceSettings

EVALUATORS_GROUP = "ckptlog-evaluators"
"""ckptlog.client.evaluator.DEFAULT_GROUP, spelled here so `evaluate --help` needs no client library (a test
keeps the two equal)."""


@app.command("evaluate")
@connection_options
def evaluate_command(
    fn: Annotated[str, Opt("--fn", help="module:function called as fn(checkpoint_path, **fn_kwargs) -> dict.")],
    concurrency: Annotated[int, Opt(min=1, help="Validations run at once.")] = 4,
    default_timeout_s: Annotated[float | None, Opt(help="Limit for requests without timeout_s.")] = None,
    group_id: Annotated[
        str | None, Opt(help=f"Consumer group shared by all evaluators (default {EVALUATORS_GROUP}).")
    ] = None,
    group_instance_id: Annotated[str | None, Opt(help="Static membership id (restarts skip a rebalance).")] = None,
    session_timeout_ms: Annotated[int, Opt(help="How soon a dead evaluator's requests move on.")] = 10_000,
    events_topic: EventsTopic = None,
    validations_topic: Annotated[
        str | None, Opt(help="Work queue the processor fills (default: the validations_topic setting).")
    ] = None,
    log_level: Annotated[str, Opt(help="DEBUG, INFO, WARNING, ...")] = "INFO",
    *,
    settings: ServiceSettings,
) -> None:
    """Validate checkpoints: consume validation requests, run FN, report each result (at least once)."""
    import asyncio

    from ckptlog import AsyncEvaluator, Topics
    from ckptlog.client.evaluator import load_function
    from ckptlog.processor.service.logs import configure_logging

    configure_logging("text", log_level)
    sys.path.insert(0, os.getcwd())  # `--fn mymodule:fn` from the current directory, as python -m does

    async def main() -> None:
        evaluator = AsyncEvaluator(
            load_function(fn),
            connection=settings,
            topics=Topics(
                events=setting(events_topic, settings, "input_topic"),
                validations=setting(validations_topic, settings, "validations_topic"),
            ),
            group_id=group_id or EVALUATORS_GROUP,
            concurrency=concurrency,
            default_timeout_s=default_timeout_s,
            session_timeout_ms=session_timeout_ms,
            group_instance_id=group_instance_id,
        )
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, evaluator.stop)
        await evaluator.run()

    _run(main())
