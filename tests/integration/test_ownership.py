"""Run ownership across input partitions (contract §9), live: a real processor, a real broker, a real tree.

Two runs whose roots nest are refused within one partition by the fold; on two partitions the
fold cannot see it. Here run `inner` (partition 1) is rooted inside run `outer`'s root
(partition 0), and `outer` reports `inner`'s root as one of its checkpoints and evicts it.
Before the claims in run roots the eviction deleted `inner`'s kept checkpoints.
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
from ckptlog.processor.service.harness import event_record, running, wait_for_views
from ckptlog.processor.storage.claims import Claimant, claim_name
from tests import factories as f
from tests.integration.test_processor_e2e import conn_of, make_settings

pytestmark = pytest.mark.timeout(120)


async def wait_until(check: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def write(path: Path, content: bytes) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "model.bin").write_bytes(content)


async def test_an_eviction_never_reaches_into_a_run_rooted_in_another_partition(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, partitions=2)
    storage = tmp_path / "runs"
    team, inner = storage / "team", storage / "team/inner"
    conn, topic = conn_of(settings), settings.input_topic
    inner_lines = [f.started("inner", root=inner.as_uri(), keep=None)]
    for i in range(2):
        write(inner / f"c{i}", b"inner's weights")
        inner_lines.append(f.report("inner", {"acc": i}, (inner / f"c{i}").as_uri()))
    outer_lines = [f.started("outer", root=team.as_uri(), keep=1, attr="acc")]
    for name, score in (("inner", 0.1), ("o1", 0.2), ("o2", 0.3)):  # inner's root as outer's checkpoint
        if name != "inner":
            write(team / name, b"outer's weights")
        outer_lines.append(f.report("outer", {"acc": score}, (team / name).as_uri()))
    async with running(settings):
        await produce(conn, [event_record(settings.input_topic, line, partition=1) for line in inner_lines])
        await wait_until(
            lambda: (inner / CLAIM_DIR / claim_name(Claimant("inner", f"{topic}[1]"))).is_file()
        )  # claimed once committed
        await produce(conn, [event_record(settings.input_topic, line, partition=0) for line in outer_lines])
        await wait_until(lambda: not (team / "o1").exists())  # outer's own eviction is deleted
        refused = await _refusals(conn, settings.checkpoints_topic, "outer")
        views = await wait_for_views(conn, settings.state_topic, {})
    assert [p for p in refused if p.endswith("/team/inner")], refused  # settled as refused, not deleted
    for i in range(2):
        assert (inner / f"c{i}/model.bin").read_bytes() == b"inner's weights"
    assert (team / "o2/model.bin").is_file() and (
        team / CLAIM_DIR / claim_name(Claimant("outer", f"{topic}[0]"))
    ).is_file()
    assert [c["path"] for c in views["inner"]["checkpoints"]] == [(inner / f"c{i}").as_uri() for i in range(2)]


async def _refusals(conn: Any, topic: str, run: str, timeout_s: float = 30.0) -> list[str]:
    """The paths of the run's deletion_refused warnings, once there is one."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = []
        for record in await read_topic(conn, topic):
            body = json.loads(record.value or b"{}")
            data = body.get("data", {})
            if body.get("subject") == run and data.get("code") == "deletion_refused":
                found.append(data.get("checkpoint_path", ""))
        if found or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.2)
