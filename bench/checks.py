"""The existence check after a restore (ckptlog/processor/service/checks.py): `python -m bench.checks [--paths N]`.

`--paths` (100,000) kept checkpoints, one per run, below a temporary local directory (every
`--present`-th one exists: a directory), checked by `find_missing` as a restored partition checks
them; prints the wall time, the process's CPU time, the event loop thread's CPU time and the
longest the loop waited beyond a 1 ms sleep meanwhile (how long the processor's own work would
have waited). It imports only `find_missing`, so it runs on an older tree as well (copy it there).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from ckptlog.processor.service.checks import find_missing


async def _lag(stop: asyncio.Event) -> float:
    worst = 0.0
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(0.001)
        worst = max(worst, time.perf_counter() - started - 0.001)
    return worst


async def measured(kept: dict[str, list[str]]) -> tuple[int, float, float, float, float]:
    stop = asyncio.Event()
    probe = asyncio.create_task(_lag(stop))
    wall, cpu, loop = time.perf_counter(), time.process_time(), time.thread_time()
    missing = await find_missing(kept)
    wall, cpu, loop = time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - loop
    stop.set()
    return sum(map(len, missing.values())), wall, cpu, loop, await probe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", type=int, default=100_000)
    parser.add_argument("--present", type=int, default=2, help="every N-th path exists")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        kept = {f"run-{n}": [f"file://{tmp}/run-{n}/ckpt-0"] for n in range(args.paths)}
        for n in range(0, args.paths, args.present):
            (Path(tmp) / f"run-{n}" / "ckpt-0").mkdir(parents=True)
        missing, wall, cpu, loop, lag = asyncio.run(measured(kept))
    print(
        f"checks: {args.paths:,} kept paths, {missing:,} missing: wall {wall:.2f} s, process CPU {cpu:.2f} s, "
        f"event loop thread CPU {loop:.2f} s, longest loop stall {lag * 1e3:.0f} ms"
    )


if __name__ == "__main__":
    main()
