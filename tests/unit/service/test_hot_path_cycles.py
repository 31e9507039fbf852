"""The processor's hot path makes no reference cycles (docs/processor.md, `tune_gc`).

The processor collects the young generation only every 100,000 allocations, so cycles made per event
pile up and are freed in one stall of the event loop: one per deletion was the latency tail of
issue 39 (docs/benchmarks.md, "The latency tail"). The whole engine of bench.engine (a
`PartitionTask` with the real fold, `Batcher`, `Deleter` and `ClaimWriter`, completions folded
back, no broker) runs twice as many events with the collector off: what the collector then finds
must not grow with the events (what it finds at all is the engine's own teardown).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
from pathlib import Path

import pytest

import bench.engine
from bench.processor import WORKLOADS, NullClaims
from ckptlog.processor.service.settings import load_settings

EVENTS = 1500


def unreachable_after(events: int, root: str, monkeypatch: pytest.MonkeyPatch, *, claims: bool) -> int:
    """Objects in cycles left by running `events` dense events through the engine, teardown included."""
    if not claims:  # no run root is ever made: every walk stops at a missing root
        monkeypatch.setattr(bench.engine, "ClaimWriter", lambda **_: NullClaims())
    lines = WORKLOADS["dense"][1](events, root=root)
    inputs = [(json.loads(line)["subject"].encode(), line) for line in lines]
    args = argparse.Namespace(
        batch=500, concurrency=8, no_publish=False, no_foldback=False, stub_deleter=False, metrics=True, root=root
    )

    async def run() -> None:
        producer = bench.engine.BuildingProducer()
        try:
            await bench.engine.run_task(args, inputs, load_settings(None, storage_root=root), producer)
        finally:
            producer.close()

    gc.collect()
    gc.disable()
    try:
        asyncio.run(run())
        return gc.collect()
    finally:
        gc.enable()


@pytest.mark.parametrize("claims", [True, False], ids=["roots made", "roots missing"])
def test_cycles_do_not_grow_with_the_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claims: bool) -> None:
    found: dict[int, int] = {}
    for events in (EVENTS, 2 * EVENTS):
        found[events] = unreachable_after(events, (tmp_path / f"runs-{events}").as_uri(), monkeypatch, claims=claims)
    grown = found[2 * EVENTS] - found[EVENTS]
    assert grown < EVENTS // 10, f"{found}: {grown} more objects in cycles for {EVENTS} more events"
