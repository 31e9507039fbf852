"""The measurements behind `python -m bench.report`, one function per section.

Each returns plain data (JSON-ready). The fold-vs-Ray passes and the memory measurement run in
their own processes (no heap left over from another pass; Ray imported only there); the Kafka
sections reuse bench.processor's and bench.scale's functions on one broker.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from bench import latency as latency_bench
from bench import peer_compare, restart, scale
from bench import processor as proc
from bench.report import RAY_SIDES, SECTIONS


def log(message: str) -> None:
    print(f"bench.report: {message}", file=sys.stderr, flush=True)


def measure_sections(args: argparse.Namespace) -> Iterator[tuple[str, Any]]:
    """(section, data) for each chosen section, in SECTIONS order (no Kafka ones first)."""
    for name in (s for s in SECTIONS if s in args.sections):
        log(f"measuring {name}")
        yield name, MEASURES[name](args)


def _json_of(argv: list[str]) -> Any:
    log(" ".join(argv[1:]))
    out = subprocess.run([sys.executable, *argv[1:]], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def ray(args: argparse.Namespace) -> dict[str, Any]:
    """Per keep: every side's pass over the same stream, the fold again at the end (drift)."""
    out: dict[str, Any] = {}
    for keep in ("5", "none"):
        passes = []
        for side in RAY_SIDES:
            argv = ["python", "-m", "bench.ray_compare", "--side", side, "--keep", keep, "--json"]
            argv += ["--reports", str(args.ray_reports), "--budget", f"{args.ray_budget:g}"]
            passes.append(_json_of(argv) | {"command": " ".join(argv)})
        out[keep] = passes
    return out


def memory(args: argparse.Namespace) -> dict[str, Any]:
    argv = ["python", "-m", "bench.scale", "--only", "memory", "--runs", str(args.runs)]
    argv += ["--window-reports", str(args.window_reports)]
    result: dict[str, Any] = _json_of(argv)
    return result | {"command": " ".join(argv)}


def _on_kafka(args: argparse.Namespace, body: Callable[[str, Path, list[str]], Awaitable[Any]]) -> Any:
    """Run `body(bootstrap, tmp, created)` on the broker; delete the topics it created."""
    from ckptlog.broker import ensure_bootstrap
    from ckptlog.processor.service.logs import configure_logging
    from ckptlog.processor.service.processor import tune_gc

    async def run() -> Any:
        tune_gc()  # as `ckptlog run` and bench.processor do
        configure_logging("text", "CRITICAL")
        bootstrap, created = args.bootstrap_servers or ensure_bootstrap(None), list[str]()
        try:
            with tempfile.TemporaryDirectory() as tmp:
                return await body(bootstrap, Path(tmp), created)
        finally:
            if created:
                await proc.delete_topics(bootstrap, created)

    return asyncio.run(run())


def e2e(args: argparse.Namespace) -> list[list[dict[str, Any]]]:
    async def body(bootstrap: str, tmp: Path, created: list[str]) -> list[list[dict[str, Any]]]:
        workloads = ["dense", "sparse"]
        return [await proc.throughput(bootstrap, tmp, args.events, created, workloads) for _ in range(args.repeats)]

    result: list[list[dict[str, Any]]] = _on_kafka(args, body)
    return result


def peer(args: argparse.Namespace) -> list[dict[str, Any]]:
    """ckptlog against the Quix Streams peer (bench/peer_compare.py), both workloads and guarantees."""

    async def body(bootstrap: str, tmp: Path, created: list[str]) -> list[dict[str, Any]]:
        guarantees = list(peer_compare.GUARANTEES)
        return await peer_compare.measure(bootstrap, tmp, args.events, args.repeats, ["dense", "sparse"], guarantees)

    result: list[dict[str, Any]] = _on_kafka(args, body)
    return result


def latency(args: argparse.Namespace) -> list[dict[str, float]]:
    async def body(bootstrap: str, tmp: Path, created: list[str]) -> list[dict[str, float]]:
        return [await latency_bench.latency(bootstrap, tmp, rate, args.seconds, created) for rate in args.rates]

    result: list[dict[str, float]] = _on_kafka(args, body)
    return result


def recovery(args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    async def body(bootstrap: str, tmp: Path, created: list[str]) -> dict[str, list[dict[str, float]]]:
        history = [await restart.restart(bootstrap, tmp, h, created) for h in args.history]
        intervals = [
            await restart.restart(bootstrap, tmp, args.interval_history, created, snapshot_every=n)
            for n in args.intervals
        ]
        return {"history": history, "intervals": intervals}

    result: dict[str, list[dict[str, float]]] = _on_kafka(args, body)
    return result


def partitions(args: argparse.Namespace) -> list[dict[str, Any]]:
    async def body(bootstrap: str, tmp: Path, created: list[str]) -> list[dict[str, Any]]:
        rows = []
        for _ in range(args.repeats):  # alternating, so drift on the host hits both
            for instances in (1, 2):
                row = await scale.partitions(bootstrap, tmp, args.scale_events, instances, created)
                log(f"partitions: {instances} instance(s): {row['rate']:,.0f} events/s")
                rows.append(row)
        return rows

    result: list[dict[str, Any]] = _on_kafka(args, body)
    return result


MEASURES: dict[str, Callable[[argparse.Namespace], Any]] = {
    "ray": ray,
    "e2e": e2e,
    "peer": peer,
    "latency": latency,
    "recovery": recovery,
    "partitions": partitions,
    "memory": memory,
}
