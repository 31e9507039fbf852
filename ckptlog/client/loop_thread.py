"""A private event loop on a daemon thread: how the sync clients run the async ones.

Training code is often synchronous (or runs its own loop, e.g. inside Jupyter), so the sync
`Reporter` never touches the caller's loop: each call is submitted to this thread and
waited for.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from ckptlog.client.errors import ClientClosed

T = TypeVar("T")


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
