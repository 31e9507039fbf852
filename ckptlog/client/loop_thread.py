"""A private event loop on a daemon thread: how the sync clients run the async ones.

Training code is often synchronous (or runs its own loop, e.g. inside Jupyter), so the sync
`Reporter` never touches the caller's loop: each call is submitted to this thread and
waited for. `blocking(AsyncReporter.report)` is such a call: the sync facade's method is derived
from the async one (its signature, types and docstring), as httpx derives `Client` and
`AsyncClient` from one base, so a method is written once, in the async client.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from ckptlog.client.errors import ClientClosed

T = TypeVar("T")
P = ParamSpec("P")


class LoopThread:
    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop thread and wait for its result (exceptions propagate)."""
        if not self._thread.is_alive():
            coro.close()
            raise ClientClosed(f"{self._thread.name} is closed; create a new client")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def close(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()


class Facade(Protocol):
    """A sync client: its async twin (`_async`) and how it waits for a call of it."""

    @property
    def _async(self) -> Any: ...

    def _call(self, coro: Coroutine[Any, Any, T], timeout_s: float | None) -> T: ...

    def _limit(self, confirm: bool | None) -> float | None: ...


def blocking(method: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]) -> Callable[Concatenate[Any, P], T]:
    """The blocking twin of an async client method, for the class body of its sync facade
    (`report = blocking(AsyncReporter.report)`): it calls the method of that name on the facade's
    `_async` and waits on the loop thread (`_call`), bounded by `_limit(confirm)` when the method
    takes `confirm`. Same parameters and docstring; mypy types its calls from the async signature."""
    confirms, name = "confirm" in inspect.signature(method).parameters, method.__name__

    def call(facade: Facade, /, *args: P.args, **kwargs: P.kwargs) -> T:
        # by name: the twin's own method (a subclass's, a test's fake), as the caller spelled the arguments
        coro: Coroutine[Any, Any, T] = getattr(facade._async, name)(*args, **kwargs)
        confirm: Any = kwargs.get("confirm")
        return facade._call(coro, facade._limit(confirm) if confirms else None)

    call.__name__, call.__qualname__, call.__doc__ = method.__name__, method.__qualname__, method.__doc__
    call.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    return call
