"""A restore longer than the session timeout, on a real broker: aiokafka sends no heartbeats while
the assignment callback runs, so a restore awaited there lost the member its partition and was run
again (bench.many's restart phase looped on it). Run beside the heartbeats, it runs once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ckptlog.processor.service import tasks
from ckptlog.processor.service.harness import expected_views, produce_events, running, wait_for_views, workload
from tests.integration.test_processor_e2e import conn_of, make_dirs, make_settings

pytestmark = pytest.mark.timeout(120)
SESSION_TIMEOUT_MS = 6000  # the broker's group.min.session.timeout.ms


async def test_a_restore_longer_than_the_session_timeout_runs_once(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, session_timeout_ms=SESSION_TIMEOUT_MS)
    real, calls = tasks.restore, []

    async def slow_restore(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        if len(calls) == 1:
            await asyncio.sleep(SESSION_TIMEOUT_MS / 1000 * 1.5)  # slow snapshot storage
        return await real(*args, **kwargs)

    monkeypatch.setattr(tasks, "restore", slow_restore)
    lines = workload((tmp_path / "runs").as_uri(), runs=3, reports=40, keep=2)
    make_dirs(lines)
    conn = conn_of(settings)
    async with running(settings, ready_timeout_s=60) as processor:
        await produce_events(conn, settings.input_topic, lines)
        expected = expected_views(lines, settings)
        assert await wait_for_views(conn, settings.state_topic, expected) == expected
        await asyncio.sleep(2 * SESSION_TIMEOUT_MS / 1000 / 5)  # two heartbeat intervals: still a member
        assert len(calls) == 1, f"restored {len(calls)} times: the member lost its partition during the restore"
        assert processor.assignment == sorted(processor.assigned) and len(processor.assignment) == 1
        assert processor.rebuilds == 0 and processor.rejoins == 0
