"""Which collections stall a process, and what they free: `PYTHONPATH=bench/gcprobe` before any
command that starts Python processes (a bench that spawns `ckptlog run`, the demo).

Every process started so writes `gc-<pid>.json` to `$BENCH_GC_PROBE_DIR` (default /tmp) every 2 s:
its argv and each collection (wall time, generation, pause in seconds, objects found unreachable).
Objects a collection finds unreachable were in reference cycles, which only the collector frees:
with `BENCH_GC_SAVEALL=1` it keeps them (`gc.DEBUG_SAVEALL`) and the file also counts them by type
and, for frames and functions, by code location: where the cycles are made. A diagnostic, never
on in a measured run (SAVEALL keeps every cycle's objects alive).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

_OUT = Path(os.environ.get("BENCH_GC_PROBE_DIR", "/tmp")) / f"gc-{os.getpid()}.json"
_collections: list[tuple[float, int, float, int]] = []
_started = [0.0]
_found: Counter[str] = Counter()


def _timed(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
        return
    pause = time.perf_counter() - _started[0]
    _collections.append((time.time(), int(info["generation"]), pause, int(info["collected"])))


def _where(found: object) -> str:
    code = getattr(found, "__code__", None) or getattr(found, "f_code", None) or getattr(found, "cr_code", None)
    kind = type(found).__qualname__
    return kind if code is None else f"{kind} {code.co_filename}:{code.co_name}"


def _dump() -> None:
    while True:
        time.sleep(2)
        if os.environ.get("BENCH_GC_SAVEALL"):
            kept, gc.garbage[:] = list(gc.garbage), []
            _found.update(_where(found) for found in kept)
            del kept
        document = {"argv": sys.argv, "collections": _collections, "unreachable": _found.most_common(40)}
        _OUT.write_text(json.dumps(document))


gc.callbacks.append(_timed)
if os.environ.get("BENCH_GC_SAVEALL"):
    gc.set_debug(gc.DEBUG_SAVEALL)
threading.Thread(target=_dump, name="gcprobe", daemon=True).start()
