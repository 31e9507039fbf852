"""Run the user's validation function under a time limit and turn whatever happens into an Outcome.

`invoke` is total: anything `fn` raises — an `Exception`, `CancelledError` (a library's cancelled
future), `SystemExit`, `KeyboardInterrupt`, `GeneratorExit`, an exception that cannot even be
printed — is VALIDATION_FAILED with its description; a result that is not a readable dict of
metrics is VALIDATION_FAILED; a run past the limit is VALIDATION_TIMEOUT. The one thing that
escapes is a cancellation of the caller's own task (`stop()`, shutdown): it still cancels `fn`.

Sync functions run on their own daemon thread (a thread cannot be killed: one that ignores its
time limit keeps running in the background, but its late answer is discarded and it does not
hold up the evaluator); an awaitable a sync function returns is awaited under the same limit.
Async functions run in a task of their own, cancelled at the limit; one that ignores the
cancellation is left to finish in the background, its late answer discarded.
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

Settled = tuple[Any, BaseException | None]
"""What fn did: (what it returned, None) or (None, what it raised)."""

_background: set[asyncio.Future[Settled]] = set()
"""Async validations past their limit that ignored the cancellation, referenced until they end."""


@dataclass(frozen=True, slots=True)
class Outcome:
    status: ResultStatus
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def is_async(fn: ValidationFn) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004 - an async __call__


def cancelled_here() -> bool:
    """Whether the running task itself is being cancelled (`Task.cancelling()`), as opposed to
    something it awaited raising CancelledError on its own (a library's cancelled future)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def type_name(value: object) -> str:
    """`type(value).__name__`, even when a metaclass makes looking it up raise."""
    try:
        name = type(value).__name__
        if isinstance(name, str):
            return str.__str__(name)  # an exact str: a subclass's __format__ would be user code too
    except BaseException:  # user code: whatever it raises, the name is only for a message
        pass
    return type.__repr__(type(value))


def safe_text(text: str) -> str:
    """`text` at most MAX_ERROR_CHARS long and encodable as UTF-8 (lone surrogates escaped)."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def describe(exc: BaseException) -> str:
    """`"Type: message"` (just `"Type"` without a message) as `safe_text`; never raises, whatever
    the exception's `__str__` or its type's name lookup does."""
    try:
        message = str.__str__(str(exc))
    except BaseException as failure:
        message = f"<str() failed: {type_name(failure)}>"
    return safe_text(f"{type_name(exc)}: {message}" if message else type_name(exc))


def _in_thread(fn: ValidationFn, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> asyncio.Future[Settled]:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Settled] = loop.create_future()

    def settle(settled: Settled) -> None:
        if not future.done():  # timed out or cancelled: the late answer is dropped
            future.set_result(settled)

    def target() -> None:
        try:
            settled: Settled = (fn(*args, **kwargs), None)
        except BaseException as exc:  # SystemExit, StopIteration, ...: all of them are fn's outcome
            settled = (None, exc)
        try:
            loop.call_soon_threadsafe(settle, settled)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    threading.Thread(target=target, name=f"ckptlog-validate-{getattr(fn, '__name__', 'fn')}", daemon=True).start()
    return future


async def _guarded(start: Callable[[], Any]) -> Settled:
    """Await what `start()` returns; every raise is a value, except the cancellation of this task."""
    try:
        return await start(), None
    except asyncio.CancelledError as exc:
        if cancelled_here():
            raise
        return None, exc
    except BaseException as exc:  # caught inside the task: SystemExit must not stop the event loop
        return None, exc


def _start(fn: ValidationFn, checkpoint_path: str, fn_kwargs: Mapping[str, Any]) -> asyncio.Future[Settled]:
    try:
        if is_async(fn):
            return asyncio.ensure_future(_guarded(lambda: fn(checkpoint_path, **fn_kwargs)))
        return _in_thread(fn, (checkpoint_path,), fn_kwargs)
    except BaseException as exc:  # no thread to be had, a callable whose attributes raise
        failed: asyncio.Future[Settled] = asyncio.get_running_loop().create_future()
        failed.set_result((None, exc))
        return failed


async def _settle(future: asyncio.Future[Settled], deadline: float | None) -> Settled | None:
    """What `future` settled to, or None when the deadline passed first (it is then cancelled and
    abandoned). A cancellation of the caller cancels `future` too, and propagates."""
    timeout = None if deadline is None else max(0.0, deadline - asyncio.get_running_loop().time())
    try:
        done, _ = await asyncio.wait({future}, timeout=timeout)
    except asyncio.CancelledError:
        future.cancel()
        raise
    if not done:
        future.cancel()
        if not future.done():  # an async fn that swallows the cancellation: let it end on its own
            _background.add(future)
            future.add_done_callback(_background.discard)
        return None
    try:
        return future.result()
    except BaseException as exc:  # fn cancelled its own task
        return None, exc


def _awaitable(value: Any) -> bool:
    try:
        return inspect.isawaitable(value)
    except BaseException:  # a result whose __class__ raises: not awaitable, and not a dict either
        return False


def outcome_of(checkpoint_path: str, value: Any, error: BaseException | None) -> Outcome:
    """VALIDATED with a dict copy of `value`, or VALIDATION_FAILED saying why not."""
    if error is not None:
        return Outcome("VALIDATION_FAILED", error=describe(error))
    try:
        if isinstance(value, Mapping):
            metrics = dict(value)
            if all(isinstance(k, str) for k in metrics):
                return Outcome("VALIDATED", metrics)
    except BaseException as exc:
        return Outcome(
            "VALIDATION_FAILED",
            error=f"the validation function's result for {checkpoint_path} could not be read: {describe(exc)}; "
            "return a plain dict of metrics",
        )
    return Outcome(
        "VALIDATION_FAILED",
        error=f"the validation function returned {type_name(value)} for {checkpoint_path}; "
        "return a dict of metrics with string keys",
    )


async def invoke(
    fn: ValidationFn, checkpoint_path: str, fn_kwargs: Mapping[str, Any], timeout_s: float | None
) -> Outcome:
    """`fn(checkpoint_path, **fn_kwargs)` -> VALIDATED (a dict of metrics), VALIDATION_FAILED
    (it raised anything at all, or returned something else) or VALIDATION_TIMEOUT. Raises only
    CancelledError, and only when the calling task is cancelled."""
    deadline = None if timeout_s is None else asyncio.get_running_loop().time() + timeout_s
    settled = await _settle(_start(fn, checkpoint_path, fn_kwargs), deadline)
    if settled is not None and settled[1] is None and _awaitable(settled[0]):
        awaitable = settled[0]  # a sync function returned a coroutine (a decorator hid `async def`)
        settled = await _settle(asyncio.ensure_future(_guarded(lambda: awaitable)), deadline)
    if settled is None:
        return Outcome(
            "VALIDATION_TIMEOUT", error=f"validation of {checkpoint_path} did not finish within {timeout_s}s"
        )
    return outcome_of(checkpoint_path, *settled)
