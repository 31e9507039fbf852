"""Run the demo: processor + evaluator + simulated training job, watched by an AsyncReader, then checked.

Everything is fresh per run (topic names and groups carry a random suffix, storage and
snapshots live in a temporary directory), so reruns never see each other's state. The topics and
files stay afterwards, explorable with the `--config` file the demo writes, until the next demo
(or `--clean`) removes them (ckptlog.demo.leftovers).
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import shutil
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckptlog.broker import ensure_bootstrap
from ckptlog.client.connect import Topics
from ckptlog.client.errors import ClientError
from ckptlog.client.evaluator import AsyncEvaluator
from ckptlog.client.invoke import Outcome
from ckptlog.client.reader import AsyncReader
from ckptlog.client.reporter import AsyncReporter
from ckptlog.demo.checks import CheckReport, check_disk, compare_views, fold_log
from ckptlog.demo.display import DemoState, RunProgress
from ckptlog.demo.leftovers import Leftovers, clear_files, demo_topics, recalled, remember, write_config
from ckptlog.demo.plan import RunPlan, default_plans
from ckptlog.demo.training import file_url, train
from ckptlog.demo.validation import validate_checkpoint
from ckptlog.events.outputs import ValidationRequested
from ckptlog.kafka.clients_io import delete_topics
from ckptlog.kafka.reader import read_topic
from ckptlog.processor.invocation import ckptlog_command
from ckptlog.processor.service.processor import Processor
from ckptlog.processor.service.settings import ServiceSettings
from ckptlog.processor.ui import console_command

log = logging.getLogger(__name__)
STARTUP_TIMEOUT_S = 60.0
SETTLE_TIMEOUT_S = 45.0


@dataclass(frozen=True, slots=True)
class DemoOptions:
    bootstrap_servers: str | None = None
    runs: int = 3
    reports: int = 30
    seed: int = 7
    pace_s: float = 0.12
    concurrency: int = 4
    clean: bool = False  # delete the topics and files at the end (kept anyway when a check failed)
    workdir: Path | None = None


@dataclass(slots=True)
class DemoResult:
    state: DemoState
    report: CheckReport = field(default_factory=CheckReport)
    workdir: Path | None = None
    kept: bool = False  # the topics and files stay; `config` finds them
    config: Path | None = None


def demo_settings(bootstrap: str, prefix: str, workdir: Path) -> ServiceSettings:
    topics = Topics.prefixed(prefix)
    return ServiceSettings(
        bootstrap_servers=bootstrap,
        group_id=prefix,
        input_topic=topics.events,
        checkpoints_topic=f"{prefix}.checkpoints",
        validations_topic=topics.validations,
        watermarks_topic=topics.watermarks,
        state_topic=topics.state,
        dlq_topic=f"{prefix}.dlq",
        topic_partitions=2,
        replication_factor=1,
        storage_root=file_url(workdir / "runs"),
        snapshots=file_url(workdir / "snapshots"),
        snapshot_every=40,
        session_timeout_ms=6000,
    )


async def _started(what: str, ready: asyncio.Event, task: asyncio.Task[None]) -> None:
    """Wait until `ready`, failing fast if the component's task died first."""
    waiter = asyncio.ensure_future(ready.wait())
    done, _ = await asyncio.wait({waiter, task}, timeout=STARTUP_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if task in done:
        task.result()
        raise ClientError(f"the demo's {what} stopped during startup; see the log above")
    if not done:
        raise ClientError(
            f"the demo's {what} did not join its consumer group within {STARTUP_TIMEOUT_S:.0f}s; "
            f"check the broker (`{ckptlog_command()} broker status`)"
        )


async def _guarded(work: Awaitable[Any], watched: list[asyncio.Task[None]]) -> Any:
    """Await `work`, but raise at once if a background component (processor, evaluator) fails."""
    job = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({job, *watched}, return_when=asyncio.FIRST_COMPLETED)
    for task in watched:
        if task in done:
            job.cancel()
            await asyncio.gather(job, return_exceptions=True)
            task.result()
            raise ClientError("a demo component stopped unexpectedly; see the log above")
    return job.result()


async def _stop(component: Processor | AsyncEvaluator, task: asyncio.Task[None]) -> None:
    component.stop()
    try:
        await asyncio.wait_for(asyncio.shield(task), 15.0)
    except (TimeoutError, Exception) as exc:  # shutting down: report, don't mask the result
        log.warning("event=demo_stop_failed component=%s error=%r", type(component).__name__, exc)
        task.cancel()


def _on_result(state: DemoState) -> Callable[[str, ValidationRequested, Outcome], None]:
    def record(run_id: str, spec: ValidationRequested, outcome: Outcome) -> None:
        state.validations[outcome.status] += 1

    return record


async def _follow(reader: AsyncReader, state: DemoState, run_id: str) -> None:
    async for view in reader.watch(run_id):
        state.runs[run_id].view = view


async def _train_all(
    plans: list[RunPlan], options: DemoOptions, settings: ServiceSettings, storage: Path, state: DemoState
) -> None:
    async def one(plan: RunPlan) -> None:
        async with AsyncReporter(
            plan.run_id,
            bootstrap_servers=settings.bootstrap_servers,
            topic=settings.input_topic,
            source="ckptlog/demo-trainer",
        ) as reporter:
            await train(plan, reporter, storage, options.reports, options.seed, options.pace_s, state.tick)

    await asyncio.gather(*(one(plan) for plan in plans))


async def _settle(reader: AsyncReader, state: DemoState, report: CheckReport) -> None:
    """Wait for every run's validated watermark to reach its report count (Ray's VALIDATED read)."""
    for run_id, run in state.runs.items():
        result = await reader.wait_for(run_id, run.total, "validated", SETTLE_TIMEOUT_S)
        if result.view is not None:
            run.view = result.view
        if not result.reached:
            report.problems.append(
                f"run {run_id}: validated watermark did not reach {run.total} within "
                f"{SETTLE_TIMEOUT_S:.0f}s (at {result.view.validated if result.view else '—'})"
            )


async def _verify(reader: AsyncReader, settings: ServiceSettings, state: DemoState, report: CheckReport) -> None:
    await _settle(reader, state, report)
    views = await reader.runs()
    assert settings.bootstrap_servers is not None
    records = await read_topic(settings.connection(settings.bootstrap_servers), settings.input_topic)
    folded = fold_log((r.value for r in records if r.value is not None), settings.fold_settings())
    compare_views(views, folded, report)
    await check_disk(views, folded.evicted, report)


async def run_demo(options: DemoOptions, state_ready: Callable[[DemoState], None] | None = None) -> DemoResult:
    """The whole demo; `state_ready` lets the caller start drawing as soon as there is state."""
    bootstrap = await asyncio.to_thread(ensure_bootstrap, options.bootstrap_servers)
    prefix = f"ckptlog-demo-{uuid.uuid4().hex[:8]}"
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="ckptlog-demo-"))
    settings = demo_settings(bootstrap, prefix, workdir)
    await _clear_last_demo(settings, workdir)
    config = write_config(settings, workdir)
    plans = default_plans(options.runs, prefix.removeprefix("ckptlog-demo-"))
    state = DemoState(
        {p.run_id: RunProgress(p, options.reports) for p in plans},
        header=f"broker {bootstrap} · topics {prefix}.* · storage {workdir}",
        console="web console (also after the demo): "
        + console_command(shlex.quote(str(config)), program=ckptlog_command()),
    )
    result = DemoResult(state, workdir=workdir, config=config)
    if state_ready is not None:
        state_ready(state)
    try:
        await _run(options, settings, plans, state, result.report)
    finally:
        result.kept = not options.clean or not result.report.ok
        if result.kept:
            remember(Leftovers.of(settings, workdir))
        else:
            await _delete_topics(settings)
            shutil.rmtree(workdir, ignore_errors=True)
    return result


async def _clear_last_demo(settings: ServiceSettings, workdir: Path) -> None:
    """The previous demo's topics and directory go, so at most one demo's leftovers exist."""
    last = recalled()
    if last is None:
        return
    bootstrap = settings.bootstrap_servers or ""
    names = demo_topics(last, bootstrap)
    if names:
        try:
            await delete_topics(settings.connection(bootstrap), names)
        except Exception as exc:  # cleanup only: a broken broker shows in the demo itself
            log.warning("event=demo_topic_cleanup_failed error=%r", exc)
    await asyncio.to_thread(clear_files, last, workdir)


async def _run(
    options: DemoOptions, settings: ServiceSettings, plans: list[RunPlan], state: DemoState, report: CheckReport
) -> None:
    topics = Topics(settings.input_topic, settings.validations_topic, settings.state_topic, settings.watermarks_topic)
    processor = Processor(settings)
    evaluator = AsyncEvaluator(
        validate_checkpoint,
        bootstrap_servers=settings.bootstrap_servers,
        topics=topics,
        group_id=f"{settings.group_id}-evaluators",
        concurrency=options.concurrency,
        session_timeout_ms=6000,
        stop_grace_s=2.0,
        on_result=_on_result(state),
    )
    async with AsyncExitStack() as stack:
        ptask = asyncio.create_task(processor.run(), name="demo-processor")
        stack.push_async_callback(_stop, processor, ptask)
        state.phase = "starting the processor"
        await _started("processor", processor.ready, ptask)
        etask = asyncio.create_task(evaluator.run(), name="demo-evaluator")
        stack.push_async_callback(_stop, evaluator, etask)
        state.phase = "starting the evaluator"
        await _started("evaluator", evaluator.ready, etask)
        reader = await stack.enter_async_context(
            AsyncReader(bootstrap_servers=settings.bootstrap_servers, topics=topics)
        )
        followers = [asyncio.create_task(_follow(reader, state, p.run_id)) for p in plans]
        stack.callback(lambda: [f.cancel() for f in followers])
        state.phase = "training"
        storage = Path(settings.storage_root.removeprefix("file://")) if settings.storage_root else Path()
        await _guarded(_train_all(plans, options, settings, storage, state), [ptask, etask])
        state.phase = "settling and checking"
        await _guarded(_verify(reader, settings, state, report), [ptask, etask])
        state.phase = "done" if report.ok else "checks failed"


async def _delete_topics(settings: ServiceSettings) -> None:
    if settings.bootstrap_servers is None:
        return
    names = list(Leftovers.of(settings, Path()).topics)
    try:
        await delete_topics(settings.connection(settings.bootstrap_servers), names)
    except Exception as exc:  # cleanup only: never mask the demo's result
        log.warning("event=demo_topic_cleanup_failed error=%r", exc)
