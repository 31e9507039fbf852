"""`ckptlog adopt-ray EXPERIMENT_DIR`: an existing Ray Train run under ckptlog's retention (issue 21).

The plan (what is sent, what is refused and why) is ckptlog/integrations/ray_adopt.py; this shell
prints it, checks the run's VIEW (a run ckptlog already holds that many reports of is left alone,
so a re-run sends nothing) and sends run_started and the reports with their deterministic ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ckptlog.cli.clients import (
    Keep,
    Opt,
    ScoreAttr,
    ScoreOrder,
    StateTopic,
    _print,
    _run,
    _start_run,
    connection_options,
    sender_options,
    setting,
)
from ckptlog.cli.main import app

if TYPE_CHECKING:
    from ckptlog.cli.clients import Sending
    from ckptlog.integrations.ray_adopt import Adoption
    from ckptlog.processor.service.settings import ServiceSettings


@app.command("adopt-ray")
@connection_options
@sender_options
def adopt_ray_command(
    experiment_dir: Annotated[Path, typer.Argument(help="Ray's experiment directory (storage_path/RunConfig.name).")],
    run_id: Annotated[str | None, Opt("--run-id", help="ckptlog run id (default: the directory's name).")] = None,
    keep: Keep = None,
    score_attribute: ScoreAttr = None,
    score_order: ScoreOrder = "max",
    dry_run: Annotated[bool, Opt("--dry-run", help="Print what would be sent; send nothing.")] = False,
    state_topic: StateTopic = None,
    *,
    send: Sending,
    settings: ServiceSettings,
) -> None:
    """Adopt a Ray Train run: run_started (root: the experiment directory) and one report per checkpoint
    Ray's checkpoint_manager_snapshot.json lists, in Ray's report order. Checkpoints that are missing,
    symlinks or not plain names inside the directory are refused and listed. Idempotent: a re-run sends nothing.
    Give the retention the run's CkptlogCallback will have (--keep, --score-attribute, --score-order)."""
    from ckptlog import AsyncReader, Topics
    from ckptlog.client import ids
    from ckptlog.integrations.ray_adopt import plan

    async def main() -> None:
        adoption = plan(experiment_dir)
        run = run_id or Path(adoption.root).name
        _describe(run, adoption)
        if dry_run:
            return
        async with AsyncReader(
            connection=settings, topics=Topics(state=setting(state_topic, settings, "state_topic"))
        ) as reader:
            view = await reader.view(run)
        if view is not None and view.committed >= len(adoption.reports):
            typer.echo(f"run {run!r} already has {view.committed} reports in ckptlog: nothing sent", err=True)
            return
        async with send.reporter(run, settings) as reporter:
            await _start_run(reporter, adoption.root, keep, score_attribute, score_order, False)
            for report in adoption.reports:
                event_id = ids.adopted_report_id(run, report.ray_index)
                _print(await reporter.report(report.metrics, report.path, False, event_id=event_id))
        typer.echo(f"adopted run {run!r}: {len(adoption.reports)} checkpoints sent", err=True)

    _run(main())


def _describe(run: str, adoption: Adoption) -> None:
    typer.echo(f"run {run!r}, root {adoption.root}: {len(adoption.reports)} checkpoints to adopt", err=True)
    for report in adoption.reports:
        latest = " (latest)" if report.path == adoption.latest else ""
        typer.echo(f"  report {report.ray_index}: {report.path}{latest}", err=True)
    for name, why in adoption.skipped:
        typer.echo(f"refused {name!r}: {why}; not adopted, so ckptlog will never delete it", err=True)
    if adoption.pending:
        typer.echo(
            f"note: Ray's pending validations ({', '.join(adoption.pending)}) are not carried over: "
            "ckptlog sees those checkpoints unvalidated",
            err=True,
        )
