"""Runs end, live (contract §3 "Finished runs"): a real processor and broker, real checkpoints on disk.

A run reports five checkpoints and finishes keeping only the best: the evicted ones are deleted,
the best and latest stay, its final VIEW on the state topic is marked finished. The processor is
restarted (a restore from its snapshot, then the log after it); a late report of the run and a
new run rooted inside its root are dead-lettered, and the final VIEW is still there.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from ckptlog.events.paths import CLAIM_DIR
from ckptlog.kafka import read_topic
from ckptlog.kafka.producers import produce
from ckptlog.processor.service.harness import event_record, running
from ckptlog.processor.service.views import read_views
from ckptlog.processor.storage.claims import Claimant, claim_name
from tests import factories as f
from tests.integration.test_processor_e2e import conn_of, make_settings

pytestmark = pytest.mark.timeout(120)


async def _until(check: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def test_a_finished_run_keeps_its_best_and_its_final_view_across_a_restart(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, snapshot_every=1)
    conn, root = conn_of(settings), tmp_path / "runs" / "a"
    lines = [f.started("a", root.as_uri(), keep=3, attr="acc")]
    scores = [0.5, 0.9, 0.1, 0.3, 0.2]  # c1 the best, c4 the latest
    for i, score in enumerate(scores):
        (root / f"c{i}").mkdir(parents=True)
        (root / f"c{i}" / "model.pt").write_bytes(b"weights")
        lines.append(f.report("a", {"acc": score}, (root / f"c{i}").as_uri()))
    lines.append(f.finished("a", "best"))

    async def final_view() -> bool:
        view = (await read_views(conn, settings.state_topic)).get("a")
        return view is not None and view.get("finished") is True

    async with running(settings):
        await produce(conn, [event_record(settings.input_topic, line) for line in lines])
        await _until(final_view)
        await _until(lambda: _gone(root, [0, 2, 3]))
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == ["c1", "c4"]

    late = [f.report("a", {"acc": 1.0}, (root / "c9").as_uri()), f.started("b", (root / "inner").as_uri())]
    async with running(settings):  # restored from its snapshot
        await produce(conn, [event_record(settings.input_topic, line) for line in late])

        async def dead_lettered() -> bool:
            return len(await read_topic(conn, settings.dlq_topic)) >= 2

        await _until(dead_lettered)
    reasons = [dict(r.headers)["__ckptlog.errors.reason"] for r in await read_topic(conn, settings.dlq_topic)]
    assert reasons == [b"run_finished", b"unsafe_storage_root"]
    view = (await read_views(conn, settings.state_topic))["a"]
    assert view["finished"] is True and [c["path"] for c in view["checkpoints"]] == [
        (root / "c4").as_uri(),
        (root / "c1").as_uri(),
    ]
    assert json.loads(json.dumps(view))["committed"] == 5


async def _gone(root: Path, numbers: list[int]) -> bool:
    return not any((root / f"c{i}").exists() for i in numbers)


async def test_a_forgotten_run_leaves_the_state_topic_and_its_checkpoints_in_storage(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path)
    conn, root = conn_of(settings), tmp_path / "runs" / "m"
    lines = [f.started("m", root.as_uri(), keep=None), f.started("n", (tmp_path / "runs" / "n").as_uri())]
    for i in range(2):
        (root / f"c{i}").mkdir(parents=True)
        lines.append(f.report("m", {}, (root / f"c{i}").as_uri()))
    async with running(settings):
        await produce(conn, [event_record(settings.input_topic, line) for line in lines])

        async def both() -> bool:
            return set(await read_views(conn, settings.state_topic)) == {"m", "n"}

        await _until(both)
        await produce(conn, [event_record(settings.input_topic, f.forgotten("m"))])

        async def only_n() -> bool:
            return set(await read_views(conn, settings.state_topic)) == {"n"}

        await _until(only_n)
    assert (root / "c0").is_dir() and (root / "c1").is_dir()


async def test_finish_idle_for_finishes_only_the_runs_idle_that_long(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Issue 24 item 2: `ckptlog finish --idle-for` reads each run's last VIEW time from the state
    topic; --dry-run sends nothing, a finished run is not finished again, --prefix filters."""
    from typer.testing import CliRunner

    from ckptlog.cli.main import _register, app

    _register()

    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path)
    conn = conn_of(settings)
    env = {
        "CKPTLOG_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "CKPTLOG_INPUT_TOPIC": settings.input_topic,
        "CKPTLOG_STATE_TOPIC": settings.state_topic,
        "CKPTLOG_DLQ_TOPIC": settings.dlq_topic,
        "CKPTLOG_GROUP_ID": settings.group_id,
    }

    def cli(*args: str) -> Any:
        result = CliRunner().invoke(app, ["finish", *args], env=env)
        assert result.exit_code == 0, result.output
        return result

    async def views() -> dict[str, Any]:
        return await read_views(conn, settings.state_topic)

    def send(*lines: bytes) -> Any:
        return produce(conn, [event_record(settings.input_topic, line) for line in lines])

    async with running(settings):
        await send(*(f.started(r, (tmp_path / "runs" / r).as_uri()) for r in ("old-a", "old-b", "other")))
        await _until(lambda: _has(views, {"old-a", "old-b", "other"}))
        await asyncio.sleep(6)
        await send(f.report("old-b", {"acc": 1.0}))  # old-b is active again
        await _until(lambda: _committed(views, "old-b", 1))
        listed = await asyncio.to_thread(cli, "--idle-for", "4s", "--dry-run")
        assert "old-a (idle" in listed.stderr and "other (idle" in listed.stderr and "old-b" not in listed.stderr
        assert listed.stdout == "", "a dry run sends nothing"
        sent = await asyncio.to_thread(cli, "--idle-for", "4s", "--prefix", "old-", "--confirm")
        assert len(sent.stdout.split()) == 1 and "other" not in sent.stderr
        now = await views()
        assert now["old-a"].get("finished") is True
        assert "finished" not in now["old-b"] and "finished" not in now["other"]
        again = await asyncio.to_thread(cli, "--idle-for", "4s", "--prefix", "old-", "--dry-run")
        assert "0 unfinished run(s)" in again.stderr, "a finished run is not idle"


async def _has(views: Any, runs: set[str]) -> bool:
    return runs <= set(await views())


async def _committed(views: Any, run: str, n: int) -> bool:
    view = (await views()).get(run)
    return view is not None and view["committed"] >= n


def _expired_a(settings: Any, root: Path) -> list[bytes]:
    """Lines that finish run `a` (c0, c1 kept) and expire its record (one kept: `x` finishes next)."""
    for name in ("c0", "c1", "c2", "c3", "b0", "b1", "inner/b0", "inner/b1"):
        (root / name).mkdir(parents=True)
        (root / name / "model.pt").write_bytes(b"weights")
    return [
        f.started("a", root.as_uri(), keep=2, attr="acc"),
        f.report("a", {"acc": 0.9}, (root / "c0").as_uri()),
        f.report("a", {"acc": 0.5}, (root / "c1").as_uri()),
        f.finished("a"),
        f.started("x", (root.parent / "x").as_uri()),
        f.finished("x"),  # the second retirement: a's record expires
    ]


async def test_a_run_id_reused_after_its_record_expired_never_deletes_the_finished_runs_checkpoints(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Contract §3 *Expiry*, §9: with one finished record kept, run `a` expires as soon as `x`
    finishes, and the fold forgets it. `a` is started again in the same root, and a literal
    redelivery of its old report registers the old kept checkpoint c0 in the new run, which then
    evicts it. Both deletions meet the retired claim of the finished `a` (written as it retired,
    before any later deletion of `a` may run), so they are refused, loudly, and nothing is deleted."""
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, finished_runs_kept=1)
    conn, root = conn_of(settings), tmp_path / "runs" / "team" / "a"
    lines = _expired_a(settings, root)
    lines += [
        f.started("a", root.as_uri(), keep=1, attr="acc"),  # a new run, as far as the fold knows
        lines[1],  # a late redelivery of c0's report: the dedup window that knew its id expired too
        f.report("a", {"acc": 0.2}, (root / "c2").as_uri()),
        f.report("a", {"acc": 0.95}, (root / "c3").as_uri()),  # evicts c0 and c2
    ]
    async with running(settings):
        await produce(conn, [event_record(settings.input_topic, line) for line in lines])
        refused = await _refused(conn, settings.checkpoints_topic, "a", 2)
    assert sorted(refused) == [(root / "c0").as_uri(), (root / "c2").as_uri()], refused
    assert all("finished" in why for why in refused.values()), refused
    for name in ("c0", "c1", "c2", "c3"):
        assert (root / name / "model.pt").read_bytes() == b"weights", name
    retired = [p.name for p in (root / CLAIM_DIR).iterdir() if p.name.startswith("retired-")]
    assert retired == [claim_name(Claimant("a", f"{settings.input_topic}[0]", retired=True))]


@pytest.mark.parametrize("below", ["inner", ""])
async def test_a_new_run_in_or_at_an_expired_runs_root_never_deletes_its_checkpoints(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path, below: str
) -> None:
    """Contract §3 *Expiry*: the fold forgot `a`, so a run `b` rooted inside a's root, or at it,
    is accepted; every deletion of b's that reaches into a's root meets a's claims and is refused
    — b's own evicted checkpoint, and at the same root one of a's kept ones that b reported."""
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, finished_runs_kept=1)
    conn, root = conn_of(settings), tmp_path / "runs" / "team" / "a"
    lines = _expired_a(settings, root)
    b_root = root / below if below else root
    lines.append(f.started("b", b_root.as_uri(), keep=1, attr="acc"))
    if not below:
        lines.append(f.report("b", {"acc": 0.05}, (root / "c1").as_uri()))  # a's kept checkpoint, in b's root
    lines += [f.report("b", {"acc": s}, (b_root / f"b{i}").as_uri()) for i, s in enumerate((0.1, 0.2))]
    expected = sorted([(b_root / "b0").as_uri(), *([] if below else [(root / "c1").as_uri()])])
    async with running(settings):
        await produce(conn, [event_record(settings.input_topic, line) for line in lines])
        refused = await _refused(conn, settings.checkpoints_topic, "b", len(expected))
        dlq = [dict(r.headers) for r in await read_topic(conn, settings.dlq_topic)]
    assert sorted(refused) == expected, (refused, dlq)
    for name in ("c0", "c1", "b0", "b1", "inner/b0", "inner/b1"):
        assert (root / name / "model.pt").read_bytes() == b"weights", name


async def _refused(conn: Any, topic: str, run: str, count: int, timeout_s: float = 30.0) -> dict[str, str]:
    """The run's deletion_refused warnings (path -> message), once there are `count` of them."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = {}
        for record in await read_topic(conn, topic):
            body = json.loads(record.value or b"{}")
            data = body.get("data", {})
            if body.get("subject") == run and data.get("code") == "deletion_refused":
                found[data.get("checkpoint_path", "")] = data.get("message", "")
        if len(found) >= count or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.2)
