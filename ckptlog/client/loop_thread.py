"""A private event loop on a daemon thread: how the sync clients run the async ones.

Training code is often synchronous (or runs its own loop, e.g. inside Jupyter), so the sync
`Reporter` never touches the caller's loop: each call is submitted to this thread and
waited for. A method is written once, async, and decorated `@twin`: on the async client it is
that coroutine method; on a sync facade (a `SyncFacade`) it is its blocking twin, with the same
signature, types and docstring (as httpx gives `Client` and `AsyncClient` one base). So a method
written in a base class both clients inherit (ckptlog/client/senders.py) needs no line in the sync
one, and `view = twin(AsyncReader.view)` derives one method in a sync class body.

Python's types have no mapping from one class's methods to another's (TypeScript's mapped types),
so the derived methods are typed through the descriptor's `__get__` overloads: mypy --strict
types a user's `reporter.report(...)` from the async signature, keyword by keyword.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from types import MethodType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from ckptlog.client.errors import ClientClosed

T = TypeVar("T")
A = TypeVar("A")
C = TypeVar("C")
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


class SyncFacade(Generic[C]):
    """A sync client: its async twin (`_async`, a C) and how it waits for a call of it. Its `twin`
    attributes block."""

    _async: C

    def _call(self, coro: Coroutine[Any, Any, T], timeout_s: float | None) -> T:
        raise NotImplementedError

    def _limit(self, confirm: bool | None) -> float | None:
        """How long a call may wait, given its `confirm=` (None: no limit)."""
        raise NotImplementedError


class twin(Generic[A, P, T]):
    """An async client method and its blocking twin (see the module docstring). On a `SyncFacade`
    it calls the method of that name on the facade's `_async` and waits on the loop thread
    (`_call`), bounded by `_limit(confirm)` when the method takes `confirm`."""

    def __init__(self, method: Callable[Concatenate[A, P], Coroutine[Any, Any, T]]) -> None:
        self.method = method
        confirms, name = "confirm" in inspect.signature(method).parameters, method.__name__

        def call(facade: SyncFacade[Any], /, *args: P.args, **kwargs: P.kwargs) -> T:
            # by name: the twin's own method (a subclass's, a test's fake), as the caller spelled the arguments
            coro: Coroutine[Any, Any, T] = getattr(facade._async, name)(*args, **kwargs)
            confirm: Any = kwargs.get("confirm")
            return facade._call(coro, facade._limit(confirm) if confirms else None)

        call.__name__, call.__qualname__, call.__doc__ = name, method.__qualname__, method.__doc__
        call.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
        self.blocking = call
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type[SyncFacade[Any]]) -> Callable[Concatenate[Any, P], T]: ...

    @overload
    def __get__(self, obj: None, owner: type[A]) -> Callable[Concatenate[A, P], Coroutine[Any, Any, T]]: ...

    @overload
    def __get__(self, obj: SyncFacade[Any], owner: type[SyncFacade[Any]]) -> Callable[P, T]: ...

    @overload
    def __get__(self, obj: A, owner: type[A]) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, obj: Any, owner: type) -> Any:
        function: Callable[..., Any] = self.blocking if issubclass(owner, SyncFacade) else self.method
        return function if obj is None else MethodType(function, obj)
