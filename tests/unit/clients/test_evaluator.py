"""The evaluator's pure parts: running the user function under a limit, reading requests,
building results, loading `module:function`."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from ckptlog.client import ids
from ckptlog.client.errors import FunctionLoadError
from ckptlog.client.evaluator import load_function, parse_request, result_event
from ckptlog.client.invoke import Outcome, invoke
from ckptlog.events.codec import decode_event
from ckptlog.events.outputs import envelope
from ckptlog.events.rejections import Rejection


def score(path: str, *, bonus: float = 0.0) -> dict[str, Any]:
    return {"acc": 0.5 + bonus, "path": path}


async def ascore(path: str, *, delay: float = 0.0) -> dict[str, Any]:
    await asyncio.sleep(delay)
    return {"acc": 1.0}


def boom(path: str) -> dict[str, Any]:
    raise ValueError(f"cannot load {path}")


def sleepy(path: str, *, seconds: float) -> dict[str, Any]:
    time.sleep(seconds)
    return {"late": True}


def not_a_dict(path: str) -> Any:
    return [1, 2]


async def test_sync_function_runs_in_a_thread_with_kwargs() -> None:
    assert await invoke(score, "/c", {"bonus": 0.25}, 5) == Outcome("VALIDATED", {"acc": 0.75, "path": "/c"})


async def test_async_function() -> None:
    assert (await invoke(ascore, "/c", {}, None)).metrics == {"acc": 1.0}


async def test_exception_becomes_failed_with_the_error_text() -> None:
    outcome = await invoke(boom, "/c", {}, 5)
    assert outcome.status == "VALIDATION_FAILED" and outcome.error == "ValueError: cannot load /c"


async def test_unexpected_kwargs_fail_instead_of_crashing() -> None:
    outcome = await invoke(ascore, "/c", {"nope": 1}, 5)
    assert outcome.status == "VALIDATION_FAILED" and "nope" in (outcome.error or "")


async def test_sync_timeout_returns_at_the_limit() -> None:
    started = time.monotonic()
    outcome = await invoke(sleepy, "/c", {"seconds": 1.0}, 0.1)
    assert outcome.status == "VALIDATION_TIMEOUT" and time.monotonic() - started < 0.5
    assert "0.1s" in (outcome.error or "")


async def test_async_timeout_cancels() -> None:
    assert (await invoke(ascore, "/c", {"delay": 5}, 0.05)).status == "VALIDATION_TIMEOUT"


async def test_non_dict_result_fails() -> None:
    outcome = await invoke(not_a_dict, "/c", {}, 5)
    assert outcome.status == "VALIDATION_FAILED" and "return a dict" in (outcome.error or "")


def request_bytes(name: str = "validation_requested", **data: Any) -> bytes:
    body = {"checkpoint_path": "/r/c1", "report_index": 3, "fn_kwargs": {"k": 1}, "timeout_s": None, **data}
    return json.dumps(envelope(name, "run-1", body, "ckptlog:t:0:5:1")).encode()


def test_parse_request() -> None:
    parsed = parse_request(request_bytes())
    assert parsed is not None
    event, spec = parsed
    assert event.id == "ckptlog:t:0:5:1" and spec.checkpoint_path == "/r/c1" and spec.fn_kwargs == {"k": 1}
    assert parse_request(request_bytes("watermark")) is None
    assert parse_request(b"garbage") is None and parse_request(None) is None


@pytest.mark.parametrize(
    "outcome",
    [
        Outcome("VALIDATED", {"acc": 1}),
        Outcome("VALIDATION_FAILED", error="x"),
        Outcome("VALIDATION_TIMEOUT", error="slow"),
    ],
)
def test_result_event_is_valid_input_with_an_id_from_the_request(outcome: Outcome) -> None:
    parsed = parse_request(request_bytes())
    assert parsed is not None
    event = decode_event(result_event(*parsed, outcome), b"run-1")
    assert not isinstance(event, Rejection) and event.type == "ckptlog.validation_result.v1"
    assert event.id == ids.validation_result_id("run-1", "ckptlog:t:0:5:1")
    assert event.data.status == outcome.status and event.data.checkpoint_path == "/r/c1"


def test_unusable_metrics_become_a_failure_saying_why() -> None:
    parsed = parse_request(request_bytes())
    assert parsed is not None
    event = decode_event(result_event(*parsed, Outcome("VALIDATED", {"model": object()})), b"run-1")
    assert (
        not isinstance(event, Rejection)
        and event.type == "ckptlog.validation_result.v1"
        and event.data.status == "VALIDATION_FAILED"
    )
    assert "not JSON" in (event.data.error or "")


def test_load_function() -> None:
    assert load_function("tests.unit.clients.test_evaluator:score") is score
    for spec, needle in [
        ("nocolon", "module:function"),
        ("no_such_module_xyz:f", "cannot import"),
        ("tests.unit.clients.test_evaluator:missing", "no callable"),
    ]:
        with pytest.raises(FunctionLoadError, match=needle):
            load_function(spec)


class _FakeProducer:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        self.sent.append(value)


async def test_dispatch_bounds_concurrency_and_finishes_every_offset() -> None:
    import threading
    from types import SimpleNamespace

    from ckptlog.client.evaluator import AsyncEvaluator
    from ckptlog.kafka.records import PartitionId

    active, peak, lock = 0, 0, threading.Lock()

    def tracked(path: str, **_: Any) -> dict[str, Any]:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.05)
        with lock:
            active -= 1
        return {"ok": 1}

    evaluator = AsyncEvaluator(tracked, concurrency=2)
    fake = _FakeProducer()
    evaluator._producer = fake  # type: ignore[assignment]
    pid = PartitionId("validations", 0)
    for offset in range(6):
        evaluator._dispatch(pid, SimpleNamespace(offset=offset, value=request_bytes()))  # type: ignore[arg-type]
    evaluator._dispatch(pid, SimpleNamespace(offset=6, value=b"not a request"))  # type: ignore[arg-type]
    await asyncio.gather(*list(evaluator._tasks))
    assert peak == 2 and len(fake.sent) == 6
    assert evaluator._progress[pid].committable() == 7


class _ItemRaises:
    ndim = 0

    def item(self) -> float:
        raise SystemExit("no item")


def _deep(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("metrics", "needle"),
    [({"x": _ItemRaises()}, "SystemExit: no item"), ({"x": _deep(100_000)}, "RecursionError")],
    ids=["item-raises", "too-deep-to-encode"],
)
def test_metrics_whose_encoding_raises_become_a_failure(metrics: dict[str, Any], needle: str) -> None:
    parsed = parse_request(request_bytes())
    assert parsed is not None
    event = decode_event(result_event(*parsed, Outcome("VALIDATED", metrics)), b"run-1")
    assert not isinstance(event, Rejection) and event.data.status == "VALIDATION_FAILED"
    assert needle in (event.data.error or "") and "unusable result" in (event.data.error or "")


def test_a_result_too_large_to_send_becomes_a_failure_the_producer_accepts() -> None:
    """Under the processor's 1 MiB limit but over the producer's max_request_size once framed:
    it was retried forever (MessageSizeTooLargeError) and the request never finished."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    parsed = parse_request(request_bytes())
    assert parsed is not None
    framing = len(result_event(*parsed, Outcome("VALIDATED", {"blob": ""})))
    value = result_event(*parsed, Outcome("VALIDATED", {"blob": "x" * (1024 * 1024 - framing - 20)}))
    size = DefaultRecordBatchBuilder.estimate_size_in_bytes(b"run-1", value, [])
    assert size <= 1024 * 1024, "aiokafka's default max_request_size"
    event = decode_event(value, b"run-1")
    assert not isinstance(event, Rejection) and event.data.status == "VALIDATION_FAILED"
    assert "over the" in (event.data.error or "") and "smaller metrics" in (event.data.error or "")
