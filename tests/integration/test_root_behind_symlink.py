"""Issue 38 item 7 on a real broker, a real `ckptlog run` and a real tree (contract §9 *Roots behind a
symlink*): a run whose root is reached through a symlink below --storage-root is refused at once.

`tmp/runs` is the --storage-root; `tmp/runs/link -> tmp/target` a symlink into a directory that
holds checkpoints (and something precious). `ckptlog start-run … --confirm` of a run below the link
exits 1 with the reason; a sender that did not wait (run_started and three reports at once) has its
reports folded and then its run refused; every later event is dead-lettered with the reason; nothing
under the link's target is deleted, while a clean run beside them has its eviction deleted. With
the link gone, `ckptlog history` (a replay of the log) still shows the run refused at the fact.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from ckptlog.kafka.producers import produce
from ckptlog.processor.service.harness import event_record
from ckptlog.processor.service.settings import ServiceSettings
from tests import factories as f
from tests.integration.test_processor_e2e import conn_of, make_settings

pytestmark = pytest.mark.timeout(240)


def config_file(settings: ServiceSettings, path: Path) -> Path:
    """The settings as a --config file, which `ckptlog run` and every client command read alike."""
    names = [
        "bootstrap_servers",
        "group_id",
        "snapshots",
        "storage_root",
        "poll_timeout_ms",
        "snapshot_every",
        *(f"{t}_topic" for t in ("input", "checkpoints", "validations", "watermarks", "state", "dlq")),
    ]
    path.write_text(json.dumps({name: getattr(settings, name) for name in names}))
    return path


def cli(config: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ckptlog.cli", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "250", "NO_COLOR": "1"},
    )


@pytest.fixture
async def processor(tmp_path: Path) -> AsyncIterator[Callable[[Path], None]]:
    """Starts `ckptlog run --config FILE` (once); stops it (SIGTERM, by its own pid) at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start(config: Path) -> None:
        log = (tmp_path / "processor.log").open("wb")
        started.append(
            subprocess.Popen(
                [sys.executable, "-m", "ckptlog.cli", "run", "--config", str(config)], stdout=log, stderr=log
            )
        )

    yield start
    for process in started:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def until(check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.2)


def tree(base: Path) -> dict[str, bytes | str]:
    return {
        str(p.relative_to(base)): p.read_bytes() if p.is_file() else "dir"
        for p in sorted(base.rglob("*"))
        if not p.is_symlink()
    }


def checkpoints(root: Path, *names: str) -> list[str]:
    for name in names:
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "model.pt").write_bytes(b"weights " + name.encode())
    return [f"{root}/{name}" for name in names]


async def until_started(config: Path, run: str, root: Path, timeout_s: float = 90.0) -> None:
    """`start-run RUN ROOT --keep 1 --confirm`, again while the processor's group has no coordinator yet."""
    deadline = time.monotonic() + timeout_s
    while True:
        done = await asyncio.to_thread(cli, config, "start-run", run, str(root), "--keep", "1", "--confirm")
        if done.returncode == 0:
            return
        assert "GroupCoordinatorNotAvailable" in done.stderr and time.monotonic() < deadline, done.stderr
        await asyncio.sleep(1)


def rejections(config: Path, run: str) -> list[dict[str, Any]]:
    out = cli(config, "rejections", run, "--json")
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


async def test_a_run_behind_a_symlink_is_refused_at_once_and_nothing_under_the_target_is_deleted(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path, processor: Callable[[Path], None]
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, snapshot_every=1)
    config = config_file(settings, tmp_path / "ckptlog.json")
    runs, target = tmp_path / "runs", tmp_path / "target"
    (target / "precious").mkdir(parents=True)
    (target / "precious" / "data.bin").write_bytes(b"precious")
    (runs / "link").symlink_to(target, target_is_directory=True)
    fast = checkpoints(runs / "link" / "fast", "c0", "c1", "c2")
    ok = checkpoints(runs / "real" / "ok", "c0", "c1")
    checkpoints(runs / "link" / "linked", "c0")
    before = tree(target)
    processor(config)

    # a clean run beside them, started first: its confirmation also waits for the processor's group
    await until_started(config, "ok", runs / "real" / "ok")

    # the sender is told at once: the run_started's confirmation fails with the reason
    started = await asyncio.to_thread(
        cli, config, "start-run", "linked", str(runs / "link" / "linked"), "--keep", "1", "--confirm"
    )
    assert started.returncode == 1, started.stdout + started.stderr
    assert "root_behind_symlink" in started.stderr and f"{runs.as_uri()}/link is a symlink" in started.stderr

    # a sender that does not wait: run_started and three reports at once (keep 1: two evictions)
    lines = [f.started("fast", (runs / "link" / "fast").as_uri(), keep=1, event_id="start-fast")]
    lines += [f.report("fast", {"i": i}, Path(p).as_uri(), event_id=f"fast-{i}") for i, p in enumerate(fast)]
    await produce(conn_of(settings), [event_record(settings.input_topic, line) for line in lines])

    # the clean run's eviction is deleted (the deleter is at work)
    for path in ok:
        done = await asyncio.to_thread(cli, config, "report", "ok", "--checkpoint", path, "--confirm")
        assert done.returncode == 0, done.stderr
    await until(lambda: not Path(ok[0]).exists())

    # every later event of the refused runs is dead-lettered with the reason
    for run in ("linked", "fast"):
        late = checkpoints(runs / "link" / run, "late")[0]
        refused = await asyncio.to_thread(cli, config, "report", run, "--checkpoint", late, "--confirm")
        assert refused.returncode == 1 and "root_behind_symlink" in refused.stderr, refused.stderr
    letters = rejections(config, "linked")
    assert [(d["reason"], d["stage"], d["type"]) for d in letters] == [
        ("root_behind_symlink", "storage", "ckptlog.run_started.v1"),
        ("root_behind_symlink", "fold", "ckptlog.report.v1"),
    ]
    assert f"{runs.as_uri()}/link is a symlink (to {str(target)!r})" in letters[0]["message"]
    assert [(d["reason"], d["type"]) for d in rejections(config, "fast")] == [
        ("root_behind_symlink", "ckptlog.run_started.v1"),
        ("root_behind_symlink", "ckptlog.report.v1"),
    ]
    warnings = cli(config, "rejections", "fast", "--warnings", "--json")
    codes = [json.loads(line)["code"] for line in warnings.stdout.splitlines()]
    assert codes.count("root_behind_symlink") == 1 and codes.count("deletion_refused") == 2, warnings.stdout

    # nothing under the link's target was deleted: every checkpoint the refused runs evicted is there
    await asyncio.sleep(2)  # time for any deletion that might (wrongly) have been handed over
    after = tree(target)
    assert {k: v for k, v in after.items() if not k.endswith("late") and "late/" not in k} == before
    assert (target / "fast" / "c0" / "model.pt").read_bytes() == b"weights c0"

    # the link is removed (the directory moved where it pointed): a replay of the log still refuses the run
    (runs / "link").unlink()
    shutil.copytree(target, runs / "link")
    history = await asyncio.to_thread(cli, config, "history", "fast", "--json")
    assert history.returncode == 0, history.stderr
    steps = [json.loads(line) for line in history.stdout.splitlines()]
    kinds = [(s["type"], [e.get("code") or e["kind"] for e in s["effects"]]) for s in steps]
    assert kinds[0][0] == "ckptlog.run_started.v1" and "started" in kinds[0][1]
    assert ("ckptlog.root_refused.v1", ["deletion_refused", "deletion_refused", "root_behind_symlink"]) in kinds
    assert kinds[-1][1] == ["rejected"]
