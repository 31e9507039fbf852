"""Validation functions for the whole-system test's `ckptlog evaluate` processes.

`--fn tests.reliability.system_validate:validate_sync` (run on the evaluator's threads) or
`:validate_async` (awaited on its loop). The request's `fn_kwargs` say what to do: `ok` returns
metrics, `raise` raises an Exception, `system_exit` raises SystemExit, `cancelled` raises
asyncio.CancelledError, `bad_str` raises an exception whose `__str__` raises, `hang` outlives any
`timeout_s` (then returns). Every request must still get a result event (VALIDATION_FAILED or
VALIDATION_TIMEOUT for all but `ok`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

HANG_S = 8.0  # past any timeout_s the streams ask for (1 s); short, so a stopped evaluator exits


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ raised")


def _outcome(path: str, mode: str) -> dict[str, Any]:
    if mode == "raise":
        raise ValueError(f"cannot validate {path}")
    if mode == "system_exit":
        raise SystemExit(3)
    if mode == "cancelled":
        raise asyncio.CancelledError()
    if mode == "bad_str":
        raise Unprintable()
    return {"acc": round((len(path) % 97) / 97, 4)}


def validate_sync(path: str, mode: str = "ok") -> dict[str, Any]:
    if mode == "hang":
        time.sleep(HANG_S)
    return _outcome(path, mode)


async def validate_async(path: str, mode: str = "ok") -> dict[str, Any]:
    if mode == "hang":
        await asyncio.sleep(HANG_S)
    await asyncio.sleep(0)
    return _outcome(path, mode)
