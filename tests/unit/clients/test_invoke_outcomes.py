"""Every outcome of the user's validation function is an Outcome (issue 20 #7): whatever it raises,
however its exception prints, a hang past the limit, an awaitable from a sync function, a result
that cannot be read. Only a cancellation of the caller itself still cancels."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from ckptlog.client.invoke import Outcome, describe, invoke


class _BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


class _BadStrAndRepr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


HOSTILE = threading.Event()
"""Set while a test runs: pytest's own reporting reads type names too."""


class _NamelessMeta(type):
    @property
    def __name__(cls) -> str:  # type: ignore[override]
        if HOSTILE.is_set():
            raise RuntimeError("no name")
        name: str = type.__dict__["__name__"].__get__(cls)
        return name


class _Nameless(Exception, metaclass=_NamelessMeta):
    pass


def _raiser(exc: BaseException) -> Callable[[str], Any]:
    def fn(path: str) -> Any:
        raise exc

    return fn


def _async_raiser(exc: BaseException) -> Callable[[str], Any]:
    async def fn(path: str) -> Any:
        await asyncio.sleep(0)
        raise exc

    return fn


async def _awaits_a_cancelled_future(path: str) -> dict[str, Any]:
    """What a library's cancelled future looks like from inside fn."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.cancel()
    await future
    return {}


RAISES = [
    (asyncio.CancelledError(), "CancelledError"),
    (SystemExit(3), "SystemExit: 3"),
    (KeyboardInterrupt(), "KeyboardInterrupt"),
    (GeneratorExit(), "GeneratorExit"),
    (StopIteration(), "StopIteration"),
    (TimeoutError("storage is slow"), "TimeoutError: storage is slow"),  # fn's own: not VALIDATION_TIMEOUT
    (_BadStr(), "_BadStr: <str() failed"),
    (_BadStrAndRepr(), "_BadStrAndRepr: <str() failed"),
    (_Nameless("x"), "test_invoke_outcomes._Nameless"),
]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("exc", "error"), RAISES, ids=[type(e).__name__ for e, _ in RAISES])
@pytest.mark.parametrize("timeout_s", [None, 5.0], ids=["no-limit", "limit"])
async def test_any_raise_is_a_failure_with_its_description(
    mode: str, exc: BaseException, error: str, timeout_s: float | None
) -> None:
    fn = _raiser(exc) if mode == "sync" else _async_raiser(exc)
    HOSTILE.set()
    try:
        outcome = await asyncio.wait_for(invoke(fn, "/c", {}, timeout_s), 5)
    finally:
        HOSTILE.clear()
    assert outcome.status == "VALIDATION_FAILED"
    assert error in (outcome.error or ""), outcome.error


@pytest.mark.parametrize("timeout_s", [None, 5.0], ids=["no-limit", "limit"])
async def test_a_cancelled_future_inside_fn_is_a_failure_not_a_cancellation(timeout_s: float | None) -> None:
    outcome = await invoke(_awaits_a_cancelled_future, "/c", {}, timeout_s)
    assert outcome == Outcome("VALIDATION_FAILED", error="CancelledError")


@pytest.mark.parametrize("timeout_s", [None, 5.0], ids=["no-limit", "limit"])
async def test_cancelling_the_caller_still_cancels_an_async_fn(timeout_s: float | None) -> None:
    started, saw_cancel = asyncio.Event(), asyncio.Event()

    async def forever(path: str) -> dict[str, Any]:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            saw_cancel.set()
            raise
        return {}

    task = asyncio.create_task(invoke(forever, "/c", {}, timeout_s))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(saw_cancel.wait(), 5)


async def test_cancelling_the_caller_still_cancels_a_sync_fn() -> None:
    started, release = threading.Event(), threading.Event()

    def blocked(path: str) -> dict[str, Any]:
        started.set()
        release.wait(10)
        return {}

    task = asyncio.create_task(invoke(blocked, "/c", {}, None))
    await asyncio.to_thread(started.wait, 5)
    task.cancel()
    try:
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        release.set()


async def test_an_async_fn_that_ignores_cancellation_times_out_at_its_limit() -> None:
    release = asyncio.Event()

    async def stubborn(path: str) -> dict[str, Any]:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                pass  # swallowed: it keeps running
        return {"late": True}

    started = time.monotonic()
    try:
        outcome = await asyncio.wait_for(invoke(stubborn, "/c", {}, 0.1), 5)
    finally:
        release.set()
    assert outcome.status == "VALIDATION_TIMEOUT" and time.monotonic() - started < 2


async def test_a_sync_fn_returning_a_coroutine_has_it_awaited_under_the_same_limit() -> None:
    async def score(path: str, delay: float) -> dict[str, Any]:
        await asyncio.sleep(delay)
        return {"acc": 0.7}

    def decorated(path: str, *, delay: float = 0.0) -> Any:  # a wrapper that hides `async def`
        return score(path, delay)

    assert await invoke(decorated, "/c", {}, 5) == Outcome("VALIDATED", {"acc": 0.7})
    outcome = await asyncio.wait_for(invoke(decorated, "/c", {"delay": 30}, 0.1), 5)
    assert outcome.status == "VALIDATION_TIMEOUT"


class _Unreadable(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        raise SystemExit("no iteration")

    def __len__(self) -> int:
        return 1


async def test_a_result_that_cannot_be_read_is_a_failure() -> None:
    outcome = await invoke(lambda path: _Unreadable(), "/c", {}, 5)
    assert outcome.status == "VALIDATION_FAILED"
    assert "could not be read" in (outcome.error or "") and "SystemExit: no iteration" in (outcome.error or "")


async def test_a_thread_that_cannot_start_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_threads(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_threads)
    outcome = await invoke(lambda path: {}, "/c", {}, 5)
    assert outcome == Outcome("VALIDATION_FAILED", error="RuntimeError: can't start new thread")


def test_describe_is_total_and_its_text_always_encodes() -> None:
    assert describe(ValueError("bad")) == "ValueError: bad"
    assert describe(RuntimeError()) == "RuntimeError"
    assert describe(_BadStr()).startswith("_BadStr: <str() failed: RuntimeError")
    HOSTILE.set()
    try:
        nameless = describe(_Nameless("x"))
    finally:
        HOSTILE.clear()
    assert nameless.endswith("test_invoke_outcomes._Nameless'>: x")
    surrogate = describe(OSError("cannot open /data/\udcff"))
    assert surrogate.encode() == b"OSError: cannot open /data/\\udcff"
    assert len(describe(ValueError("x" * 10_000))) == 4000
