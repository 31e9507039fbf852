"""AsyncEvaluator on a real broker: each status, and no request lost when an evaluator is killed -9."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient

from ckptlog import AsyncEvaluator, Topics
from ckptlog.client import ids
from ckptlog.events.codec import decode_event
from ckptlog.events.outputs import encode_json, envelope
from ckptlog.events.rejections import Rejection
from ckptlog.kafka.clients_io import EventProducer
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.reader import read_topic
from tests.integration.conftest import TopicFactory

REPO = Path(__file__).resolve().parents[2]
HANG_ENV = "CKPTLOG_TEST_EVALUATOR_HANG"


def judge(checkpoint_path: str, *, mode: str = "ok", marker: str | None = None) -> dict[str, Any]:
    """ok -> a score; fail -> raises; slow -> outlives any limit. With $HANG_ENV set (the
    evaluator we kill), it writes `marker` and hangs."""
    if os.environ.get(HANG_ENV):
        if marker:
            Path(marker).write_text("started")
        time.sleep(600)
    if mode == "fail":
        raise RuntimeError(f"no GPU for {checkpoint_path}")
    if mode == "slow":
        time.sleep(5)
    return {"acc": 0.9, "checked": checkpoint_path}


async def _request(
    bootstrap: str, topic: str, run: str, path: str, offset: int, timeout_s: float | None, **fn_kwargs: Any
) -> str:
    """A validation_requested event as the processor writes it; returns its id."""
    event_id = f"ckptlog:{run}.events:0:{offset}:1"
    body = envelope(
        "validation_requested",
        run,
        {"checkpoint_path": path, "report_index": offset, "fn_kwargs": fn_kwargs, "timeout_s": timeout_s},
        event_id,
    )
    producer = EventProducer(KafkaConnection(bootstrap))
    await producer.start()
    try:
        await producer.send(topic, run.encode(), encode_json(body))
    finally:
        await producer.stop()
    return event_id


async def _results(bootstrap: str, topic: str, count: int, timeout_s: float = 30) -> list[Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        records = await read_topic(KafkaConnection(bootstrap), topic)
        events = [decode_event(r.value, r.key) for r in records if r.value is not None]
        results = [e for e in events if not isinstance(e, Rejection) and e.type == "ckptlog.validation_result.v1"]
        if len(results) >= count or time.monotonic() > deadline:
            return results
        await asyncio.sleep(0.2)


async def test_validated_failed_and_timeout(kafka_bootstrap: str, topic_factory: TopicFactory) -> None:
    events, validations = await topic_factory(), await topic_factory(partitions=2)
    requests = {
        "/r/ok": await _request(kafka_bootstrap, validations, "run-1", "/r/ok", 1, 10, mode="ok"),
        "/r/fail": await _request(kafka_bootstrap, validations, "run-2", "/r/fail", 2, 10, mode="fail"),
        "/r/slow": await _request(kafka_bootstrap, validations, "run-3", "/r/slow", 3, None, mode="slow"),
    }
    group = f"eval-{uuid.uuid4().hex[:8]}"
    evaluator = AsyncEvaluator(
        judge,
        bootstrap_servers=kafka_bootstrap,
        topics=Topics(events=events, validations=validations),
        group_id=group,
        concurrency=2,
        default_timeout_s=0.5,
        stop_grace_s=1,
    )
    task = asyncio.create_task(evaluator.run())
    try:
        results = {r.data.checkpoint_path: r for r in await _results(kafka_bootstrap, events, 3)}
    finally:
        evaluator.stop()
        await task
    assert {p: r.data.status for p, r in results.items()} == {
        "/r/ok": "VALIDATED",
        "/r/fail": "VALIDATION_FAILED",
        "/r/slow": "VALIDATION_TIMEOUT",
    }
    assert results["/r/ok"].data.metrics == {"acc": 0.9, "checked": "/r/ok"}
    assert results["/r/fail"].data.error == "RuntimeError: no GPU for /r/fail"
    assert "0.5s" in (results["/r/slow"].data.error or "")
    for path, result in results.items():
        assert result.id == ids.validation_result_id(result.subject, requests[path])
    assert evaluator.results == {"VALIDATED": 1, "VALIDATION_FAILED": 1, "VALIDATION_TIMEOUT": 1}
    assert await _committed(kafka_bootstrap, group) == 3, "every finished request is committed"


async def _committed(bootstrap: str, group: str) -> int:
    """Sum of the group's committed offsets (one request per offset here)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return sum(meta.offset for meta in offsets.values())


async def _wait_for_file(path: Path, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, f"evaluator exited early: {proc.stderr.read() if proc.stderr else b''!r}"
        assert time.monotonic() < deadline, "the evaluator never started the validation"
        await asyncio.sleep(0.1)


async def test_evaluator_killed_mid_task_loses_no_request(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    events, validations = await topic_factory(), await topic_factory()
    group, marker = f"eval-{uuid.uuid4().hex[:8]}", tmp_path / "started"
    request_id = await _request(kafka_bootstrap, validations, "run-k", "/r/k", 1, 120, marker=str(marker))
    cmd = [
        sys.executable,
        "-m",
        "ckptlog.cli",
        "evaluate",
        "--fn",
        "tests.integration.test_clients_evaluator:judge",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--events-topic",
        events,
        "--validations-topic",
        validations,
        "--group-id",
        group,
        "--group-instance-id",
        "evaluator-0",
        "--session-timeout-ms",
        "6000",
    ]
    proc = subprocess.Popen(
        cmd, cwd=REPO, env={**os.environ, HANG_ENV: "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        await _wait_for_file(marker, proc)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert await _results(kafka_bootstrap, events, 1, timeout_s=0.5) == []
    # The replacement takes over the same static member id: no session timeout to sit out.
    evaluator = AsyncEvaluator(
        judge,
        bootstrap_servers=kafka_bootstrap,
        topics=Topics(events=events, validations=validations),
        group_id=group,
        group_instance_id="evaluator-0",
        session_timeout_ms=6000,
    )
    task = asyncio.create_task(evaluator.run())
    try:
        results = await _results(kafka_bootstrap, events, 1)
    finally:
        evaluator.stop()
        await task
    assert [r.data.status for r in results] == ["VALIDATED"]
    assert await _committed(kafka_bootstrap, group) == 1
    assert results[0].id == ids.validation_result_id("run-k", request_id)
    assert json.loads(json.dumps(results[0].data.metrics)) == {"acc": 0.9, "checked": "/r/k"}


class _Held:
    """An async validation function that counts its calls and holds each until released."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.started: asyncio.Queue[str] = asyncio.Queue()
        self.release = asyncio.Event()

    async def __call__(self, checkpoint_path: str) -> dict[str, Any]:
        self.calls.append(checkpoint_path)
        self.started.put_nowait(checkpoint_path)
        await self.release.wait()
        return {"acc": 0.5}


class _Watched(AsyncEvaluator):
    """An AsyncEvaluator whose assignments can be awaited."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.assignments: asyncio.Queue[list[Any]] = asyncio.Queue()

    async def _assigned(self, partitions: list[Any]) -> None:
        await super()._assigned(partitions)
        self.assignments.put_nowait(partitions)


async def test_a_rebalance_that_hands_the_partition_back_does_not_rerun_its_requests(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    events, validations, elsewhere = await topic_factory(), await topic_factory(), await topic_factory()
    group, fn = f"eval-{uuid.uuid4().hex[:8]}", _Held()
    kwargs: dict[str, Any] = {"bootstrap_servers": kafka_bootstrap, "group_id": group, "session_timeout_ms": 6000}
    first = _Watched(fn, topics=Topics(events=events, validations=validations), concurrency=4, **kwargs)
    # Joins the same group for another topic: the group rebalances and the partition goes back to `first`.
    second = AsyncEvaluator(judge, topics=Topics(events=events, validations=elsewhere), **kwargs)
    await _request(kafka_bootstrap, validations, "run-b", "/r/0", 0, 60)
    task = asyncio.create_task(first.run())
    tasks = [task]
    try:
        assert await asyncio.wait_for(fn.started.get(), 30) == "/r/0"
        first_assignment = await asyncio.wait_for(first.assignments.get(), 1)
        tasks.append(asyncio.create_task(second.run()))
        assert await asyncio.wait_for(first.assignments.get(), 30) == first_assignment, "handed back"
        # Offset 1 is fetched after offset 0: once it runs, a re-run of offset 0 would have started.
        await _request(kafka_bootstrap, validations, "run-b", "/r/1", 1, 60)
        while (await asyncio.wait_for(fn.started.get(), 30)) != "/r/1":
            pass
        fn.release.set()
        results = await _results(kafka_bootstrap, events, 2)
    finally:
        first.stop()
        second.stop()
        await asyncio.gather(*tasks)
    assert sorted(fn.calls) == ["/r/0", "/r/1"], "each request is validated once"
    assert sorted(r.data.checkpoint_path for r in results) == ["/r/0", "/r/1"]
    assert await _committed(kafka_bootstrap, group) == 2


async def _wedger(checkpoint_path: str, *, mode: str) -> dict[str, Any]:
    """Raises what used to escape the evaluator: no result, no log line, no commit."""
    if mode == "cancelled":  # a library's cancelled future
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.cancel()
        await future
    raise SystemExit(f"gave up on {checkpoint_path}")


async def test_fn_raising_cancelled_error_or_system_exit_fails_the_checkpoint_and_commits(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    events, validations = await topic_factory(), await topic_factory()
    await _request(kafka_bootstrap, validations, "run-w", "/r/cancelled", 0, 10, mode="cancelled")
    await _request(kafka_bootstrap, validations, "run-w", "/r/exit", 1, None, mode="exit")
    group = f"eval-{uuid.uuid4().hex[:8]}"
    evaluator = AsyncEvaluator(
        _wedger,
        bootstrap_servers=kafka_bootstrap,
        topics=Topics(events=events, validations=validations),
        group_id=group,
    )
    task = asyncio.create_task(evaluator.run())
    try:
        results = {r.data.checkpoint_path: r.data for r in await _results(kafka_bootstrap, events, 2)}
    finally:
        evaluator.stop()
        await task
    assert {path: (data.status, data.error) for path, data in results.items()} == {
        "/r/cancelled": ("VALIDATION_FAILED", "CancelledError"),
        "/r/exit": ("VALIDATION_FAILED", "SystemExit: gave up on /r/exit"),
    }
    assert await _committed(kafka_bootstrap, group) == 2, "both requests are done"
