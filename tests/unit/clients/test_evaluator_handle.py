"""The evaluator's request handling with a fake producer and consumer (issue 20 #7): every outcome
of fn ends as a sent result and a log line, and a rebalance that hands a partition back does not
start its requests a second time."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from ckptlog.client import ids
from ckptlog.client.evaluator import AsyncEvaluator
from ckptlog.client.invoke import Outcome
from ckptlog.events.codec import decode_event
from ckptlog.events.outputs import envelope
from ckptlog.events.rejections import Rejection
from ckptlog.kafka.records import PartitionId

PID = PartitionId("validations", 0)


def request(offset: int, run: str = "run-1") -> Any:
    body = {"checkpoint_path": f"/r/c{offset}", "report_index": offset, "fn_kwargs": {}, "timeout_s": None}
    value = json.dumps(envelope("validation_requested", run, body, f"ckptlog:t:0:{offset}:1")).encode()
    return SimpleNamespace(offset=offset, value=value)


class FakeProducer:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        self.sent.append(value)

    def results(self) -> list[Any]:
        events = [decode_event(value, b"run-1") for value in self.sent]
        assert not any(isinstance(e, Rejection) for e in events), events
        return events


class FakeConsumer:
    def __init__(self) -> None:
        self.commits: list[dict[PartitionId, int]] = []

    async def commit(self, offsets: dict[PartitionId, int]) -> None:
        self.commits.append(dict(offsets))


def evaluator(fn: Any, **kwargs: Any) -> tuple[AsyncEvaluator, FakeProducer, FakeConsumer]:
    ev = AsyncEvaluator(fn, concurrency=4, **kwargs)
    producer, consumer = FakeProducer(), FakeConsumer()
    ev._producer, ev._consumer = producer, consumer  # type: ignore[assignment]
    return ev, producer, consumer


async def settle(ev: AsyncEvaluator) -> None:
    """Wait for every task in flight; each must end without an exception."""
    tasks = list(ev._tasks)
    for task in await asyncio.gather(*tasks, return_exceptions=True):
        assert task is None, f"a request's task died: {task!r}"


async def _cancelled_future(path: str) -> dict[str, Any]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.cancel()
    await future
    return {}


async def test_fn_raising_cancelled_error_sends_a_failure_and_commits(caplog: pytest.LogCaptureFixture) -> None:
    ev, producer, consumer = evaluator(_cancelled_future)
    with caplog.at_level(logging.INFO, "ckptlog.client.evaluator"):
        ev._dispatch(PID, request(0))
        await settle(ev)
    [result] = producer.results()
    assert result.data.status == "VALIDATION_FAILED" and result.data.error == "CancelledError"
    assert result.id == ids.validation_result_id("run-1", "ckptlog:t:0:0:1")
    await ev._commit(consumer, [PID])  # type: ignore[arg-type]
    assert consumer.commits == [{PID: 1}]
    assert "event=validation_finished run=run-1 checkpoint=/r/c0 status=VALIDATION_FAILED" in caplog.text
    assert ev.results == {"VALIDATION_FAILED": 1}


async def test_a_result_that_cannot_be_built_still_sends_a_failure(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any) -> tuple[Outcome, bytes]:
        raise RuntimeError("encoder bug")

    monkeypatch.setattr("ckptlog.client.evaluator.encode_result", broken)
    ev, producer, _ = evaluator(lambda path: {"acc": 1.0})
    with caplog.at_level(logging.INFO, "ckptlog.client.evaluator"):
        ev._dispatch(PID, request(0))
        await settle(ev)
    [result] = producer.results()
    assert result.data.status == "VALIDATION_FAILED" and result.data.checkpoint_path == "/r/c0"
    assert "RuntimeError: encoder bug" in (result.data.error or "")
    assert "event=result_build_failed run=run-1 checkpoint=/r/c0 error='RuntimeError: encoder bug'" in caplog.text
    assert ev._progress[PID].committable() == 1


@pytest.mark.parametrize("exc", [GeneratorExit(), SystemExit(2), ValueError("hook")], ids=type)
async def test_an_on_result_hook_that_raises_is_logged(exc: BaseException, caplog: pytest.LogCaptureFixture) -> None:
    seen: list[Outcome] = []

    def hook(run: str, spec: Any, outcome: Outcome) -> None:
        seen.append(outcome)
        raise exc

    ev, producer, _ = evaluator(lambda path: {"acc": 1.0}, on_result=hook)
    with caplog.at_level(logging.INFO, "ckptlog.client.evaluator"):
        ev._dispatch(PID, request(0))
        await settle(ev)
    assert [r.data.status for r in producer.results()] == ["VALIDATED"] and len(seen) == 1
    assert f"event=on_result_failed run=run-1 checkpoint=/r/c0 error='{type(exc).__name__}" in caplog.text
    assert ev._progress[PID].committable() == 1


async def test_a_send_cancelled_under_it_is_retried(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """aiokafka cancels a send's future when its batch is aborted: not a cancellation of ours."""
    ev, producer, _ = evaluator(lambda path: {"acc": 1.0})
    real, calls = producer.send, []

    async def flaky(topic: str, key: bytes, value: bytes) -> None:
        calls.append(value)
        if len(calls) == 1:
            raise asyncio.CancelledError
        await real(topic, key, value)

    producer.send = flaky  # type: ignore[method-assign]
    monkeypatch.setattr("ckptlog.client.evaluator.RESEND_FIRST_S", 0.0)
    with caplog.at_level(logging.INFO, "ckptlog.client.evaluator"):
        ev._dispatch(PID, request(0))
        await settle(ev)
    assert len(calls) == 2 and [r.data.status for r in producer.results()] == ["VALIDATED"]
    assert "event=result_send_failed run=run-1" in caplog.text


async def test_stop_past_the_grace_still_cancels_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    started = asyncio.Event()

    async def forever(path: str) -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()
        return {}

    ev, producer, _ = evaluator(forever)
    with caplog.at_level(logging.INFO, "ckptlog.client.evaluator"):
        ev._dispatch(PID, request(0))
        await started.wait()
        [task] = list(ev._tasks)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert producer.sent == [] and ev._progress[PID].committable() == 0
    assert "event=validation_abandoned run=run-1 checkpoint=/r/c0" in caplog.text


class Held:
    """An async fn that counts its calls and holds them until released."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.release = asyncio.Event()

    async def __call__(self, path: str) -> dict[str, Any]:
        self.calls.append(path)
        await self.release.wait()
        return {"acc": 0.5}


@pytest.fixture
def held() -> Iterator[Held]:
    fn = Held()
    yield fn
    fn.release.set()


async def rebalance(ev: AsyncEvaluator, back: list[PartitionId]) -> None:
    """Eager rebalancing, as aiokafka does it: every partition revoked, then the new assignment."""
    await ev._revoked(sorted(ev._progress))
    await ev._assigned(back)


async def test_requests_in_flight_are_not_restarted_when_the_partition_comes_back(held: Held) -> None:
    ev, producer, consumer = evaluator(held)
    for offset in (0, 1):
        ev._dispatch(PID, request(offset))
    await asyncio.sleep(0)  # let both start
    await rebalance(ev, [PID])
    for offset in (0, 1, 2):  # the consumer fetches again from the committed offset (0)
        ev._dispatch(PID, request(offset))
    assert ev._progress[PID].committable() == 0
    held.release.set()
    await settle(ev)
    assert held.calls == ["/r/c0", "/r/c1", "/r/c2"], "each request runs once"
    assert sorted(r.data.checkpoint_path for r in producer.results()) == ["/r/c0", "/r/c1", "/r/c2"]
    await ev._commit(consumer, [PID])  # type: ignore[arg-type]
    assert consumer.commits[-1] == {PID: 3}


async def test_requests_finished_but_not_committed_are_not_rerun(held: Held) -> None:
    ev, producer, consumer = evaluator(held)
    ev._dispatch(PID, request(0))
    await asyncio.sleep(0)
    await ev._revoked([PID])  # commits 0: the request is still running
    held.release.set()
    await settle(ev)  # finished while no partition is assigned: nothing commits it
    await ev._assigned([PID])
    ev._dispatch(PID, request(0))
    await settle(ev)
    assert held.calls == ["/r/c0"] and len(producer.sent) == 1
    await ev._commit(consumer, [PID])  # type: ignore[arg-type]
    assert consumer.commits == [{PID: 0}, {PID: 1}]
    assert ev._started.size == 0, "forgotten once committed"


async def test_requests_finished_before_the_partition_is_fetched_again_are_not_rerun(held: Held) -> None:
    ev, producer, consumer = evaluator(held)
    ev._dispatch(PID, request(0))
    await asyncio.sleep(0)
    await rebalance(ev, [PID])
    held.release.set()
    await settle(ev)  # finished once the partition is ours again, before its first fetch
    ev._dispatch(PID, request(0))
    await settle(ev)
    assert held.calls == ["/r/c0"] and len(producer.sent) == 1
    await ev._commit(consumer, [PID])  # type: ignore[arg-type]
    assert consumer.commits[-1] == {PID: 1}


async def test_a_request_finished_for_a_lost_partition_is_redone_if_it_comes_back_later(held: Held) -> None:
    """At least once: what this member ran for a partition it lost is not remembered when the
    partition comes back in a later rebalance (the other member may not have committed it)."""
    ev, producer, _ = evaluator(held)
    ev._dispatch(PID, request(0))
    await asyncio.sleep(0)
    await rebalance(ev, [])  # to another member
    held.release.set()
    await settle(ev)
    assert len(producer.sent) == 1, "the result of work already done is still sent"
    await rebalance(ev, [PID])  # back, later: whatever was not committed is done again
    ev._dispatch(PID, request(0))
    await settle(ev)
    assert held.calls == ["/r/c0", "/r/c0"] and len(producer.sent) == 2
