"""Run the user's validation function under a time limit and turn what happens into a status.

Sync functions run on their own daemon thread (a thread cannot be killed: one that ignores
its time limit keeps running in the background, but its late answer is discarded and it
does not hold up the evaluator). Async functions are cancelled at the limit.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

ResultStatus = Literal["VALIDATED", "VALIDATION_FAILED", "VALIDATION_TIMEOUT"]
ValidationFn = Callable[..., Any]
MAX_ERROR_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Outcome:
    status: ResultStatus
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def is_async(fn: ValidationFn) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004 - an async __call__


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


async def _in_thread(fn: ValidationFn, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # timed out or cancelled: the late answer is dropped
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value, error = fn(*args, **kwargs), None
        except BaseException as exc:
            value, error = None, exc if isinstance(exc, Exception) else RuntimeError(describe(exc))
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    threading.Thread(target=target, name=f"ckptlog-validate-{getattr(fn, '__name__', 'fn')}", daemon=True).start()
    return await future


async def invoke(
    fn: ValidationFn, checkpoint_path: str, fn_kwargs: Mapping[str, Any], timeout_s: float | None
) -> Outcome:
    """`fn(checkpoint_path, **fn_kwargs)` -> VALIDATED (a dict of metrics), VALIDATION_FAILED
    (it raised or returned something else) or VALIDATION_TIMEOUT."""
    try:
        call = fn(checkpoint_path, **fn_kwargs) if is_async(fn) else _in_thread(fn, (checkpoint_path,), fn_kwargs)
        result = await asyncio.wait_for(call, timeout_s)
    except TimeoutError:
        return Outcome(
            "VALIDATION_TIMEOUT", error=f"validation of {checkpoint_path} did not finish within {timeout_s}s"
        )
    except Exception as exc:
        return Outcome("VALIDATION_FAILED", error=describe(exc))
    if not isinstance(result, Mapping) or not all(isinstance(k, str) for k in result):
        return Outcome(
            "VALIDATION_FAILED",
            error=f"the validation function returned {type(result).__name__} "
            f"for {checkpoint_path}; return a dict of metrics with string keys",
        )
    return Outcome("VALIDATED", dict(result))
