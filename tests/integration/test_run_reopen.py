"""Reopened runs, live (contract §3 "Reopened runs", issue 38 item 6): a real processor and broker,
real checkpoints on disk, `ckptlog reopen` and the Reporter.

A run keeps one checkpoint, finishes and retires (its retired claim lands in its root); `ckptlog
reopen --confirm` brings it back as it finished, its retired claim goes, and across a processor
restart it takes reports again, whose evictions are deleted. It finishes and reopens once more, each
event named by the run's epoch. A reopen of a live run, of an unknown run and of a run whose finished
record expired is refused with its reason, and exits 1.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ckptlog.client import ids
from ckptlog.client.reporter import AsyncReporter
from ckptlog.events.paths import CLAIM_DIR
from ckptlog.kafka.producers import produce
from ckptlog.processor.service.harness import event_record, running
from ckptlog.processor.service.settings import ServiceSettings
from ckptlog.processor.service.views import read_views
from ckptlog.processor.storage.claims import Claimant, claim_name
from tests import factories as f
from tests.integration.test_processor_e2e import conn_of, make_settings
from tests.integration.test_run_lifecycle import _until

pytestmark = pytest.mark.timeout(180)


def cli(settings: ServiceSettings, *args: str) -> Any:
    from typer.testing import CliRunner

    from ckptlog.cli.main import _register, app

    _register()
    env = {
        "CKPTLOG_BOOTSTRAP_SERVERS": settings.bootstrap_servers or "",
        "CKPTLOG_INPUT_TOPIC": settings.input_topic,
        "CKPTLOG_STATE_TOPIC": settings.state_topic,
        "CKPTLOG_DLQ_TOPIC": settings.dlq_topic,
        "CKPTLOG_CHECKPOINTS_TOPIC": settings.checkpoints_topic,
        "CKPTLOG_GROUP_ID": settings.group_id,
    }
    return CliRunner().invoke(app, [*args, "--confirm", "--confirm-timeout-s", "60"], env=env)


def reporter(settings: ServiceSettings, run: str) -> AsyncReporter:
    return AsyncReporter(
        run,
        bootstrap_servers=settings.bootstrap_servers,
        topic=settings.input_topic,
        state_topic=settings.state_topic,
        dlq_topic=settings.dlq_topic,
        checkpoints_topic=settings.checkpoints_topic,
        processor_group=settings.group_id,
        confirm=True,
    )


def checkpoints(root: Path, *names: str) -> list[str]:
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "model.pt").write_bytes(b"weights")
    return [(root / name).as_uri() for name in names]


def claims(root: Path) -> set[str]:
    return {p.name for p in (root / CLAIM_DIR).iterdir()} if (root / CLAIM_DIR).exists() else set()


async def test_a_finished_run_is_reopened_goes_on_across_a_restart_and_finishes_again(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, snapshot_every=1)
    conn, root = conn_of(settings), tmp_path / "runs" / "a"
    c0, c1, c2 = checkpoints(root, "c0", "c1", "c2")
    mine = Claimant("a", f"{settings.input_topic}[0]")
    retired = claim_name(mine._replace(retired=True))

    async def view() -> dict[str, Any]:
        return (await read_views(conn, settings.state_topic)).get("a") or {}

    async with running(settings):
        async with reporter(settings, "a") as first:
            await first.run_started(root.as_uri(), num_to_keep=1, checkpoint_score_attribute="acc")
            await first.report({"acc": 0.5}, c0)
            await first.report({"acc": 0.9}, c1)  # evicts c0
            await _until(lambda: _gone(root / "c0"))
            finished = await first.finish()
        assert finished.event_id == ids.finished_id("a")  # epoch 0: the id every finish had
        await _until(lambda: _has(root, retired))  # retired: its retired claim bars every deletion there
        reopened = await asyncio.to_thread(cli, settings, "reopen", "a")
        assert reopened.exit_code == 0, reopened.output
        assert reopened.stdout.strip() == ids.reopened_id("a", 1)
        now = await view()
        assert "finished" not in now and now["reopened"] == 1 and now["committed"] == 2
        assert [c["path"] for c in now["checkpoints"]] == [c1]  # exactly what it kept
        await _until(lambda: _lacks(root, retired))  # removed once the reopen committed
        assert claim_name(mine) in claims(root)  # the root stays claimed by the run

    async with running(settings):  # restored from its snapshot (schema 6): the run is open
        async with reporter(settings, "a") as second:
            await second.report({"acc": 1.0}, c2, index=2)  # evicts c1: deleted, not refused
            await _until(lambda: _gone(root / "c1"))
        now = await view()
        assert [c["path"] for c in now["checkpoints"]] == [c2] and now["committed"] == 3
        again = await asyncio.to_thread(cli, settings, "finish", "a")  # its epoch read from the VIEW
        assert again.exit_code == 0, again.output
        assert again.stdout.strip() == ids.finished_id("a", 1)
        assert (await view())["finished"] is True
        await _until(lambda: _has(root, retired))
        twice = await asyncio.to_thread(cli, settings, "reopen", "a")
        assert twice.exit_code == 0 and twice.stdout.strip() == ids.reopened_id("a", 2), twice.output
        assert (await view())["reopened"] == 2
        await _until(lambda: _lacks(root, retired))
        live = await asyncio.to_thread(cli, settings, "reopen", "a")
        assert live.exit_code == 1 and "run_not_finished" in live.output, live.output
        nobody = await asyncio.to_thread(cli, settings, "reopen", "nobody")
        assert nobody.exit_code == 1 and "unknown_run" in nobody.output, nobody.output
    assert (root / "c2" / "model.pt").exists() and not (root / "c1").exists()


async def test_a_reopen_after_the_finished_record_expired_is_refused_and_its_checkpoints_stay_barred(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, finished_runs_kept=1)
    conn, root = conn_of(settings), tmp_path / "runs" / "a"
    (c0,) = checkpoints(root, "c0")
    lines = [
        f.started("a", root.as_uri(), keep=1, attr="acc"),
        f.report("a", {"acc": 0.5}, c0),
        f.finished("a"),
        f.started("x", (tmp_path / "runs" / "x").as_uri()),
        f.finished("x"),  # the second retirement: a's record expires
    ]
    retired = claim_name(Claimant("a", f"{settings.input_topic}[0]", retired=True))
    async with running(settings):
        await produce(conn, [event_record(settings.input_topic, line) for line in lines])
        await _until(lambda: _finished(conn, settings, "x"))
        refused = await asyncio.to_thread(cli, settings, "reopen", "a")
    assert refused.exit_code == 1, refused.output
    assert "unknown_run" in refused.output and "--finished-runs-kept" in refused.output
    assert retired in claims(root) and (root / "c0" / "model.pt").exists()


async def _finished(conn: Any, settings: ServiceSettings, run: str) -> bool:
    return bool((await read_views(conn, settings.state_topic)).get(run, {}).get("finished"))


async def _gone(path: Path) -> bool:
    return not path.exists()


async def _has(root: Path, name: str) -> bool:
    return name in claims(root)


async def _lacks(root: Path, name: str) -> bool:
    return name not in claims(root)
