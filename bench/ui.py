"""The web console's figures (issue 23): how soon a committed report shows up live, and how the
pages answer with many runs. `python -m bench.ui [--reports 100] [--runs 10000]`.

On one broker (KAFKA_BOOTSTRAP_SERVERS, else the local one), in this process: a processor
(exactly_once), the console over a `LiveSource`, an SSE client on `/events`. Then

- **many runs**: `--runs` runs started at once (one `run_started` each, preloaded), then the
  time until the console holds them all, and the wall time of `GET /` (the runs page, 100 a page),
  `GET /?page=50` and `GET /api/runs` (every run's VIEW as JSON), best of 3;
- **live latency**, with those runs on the page: `--reports` reports to one run, one at a time,
  from the report's producer acknowledgement to (a) the SSE event naming the run and (b)
  `/api/runs/{run}` showing its `committed` count (what a browser's page does on that event).
  p50/p99/max in ms;
- **a big run**: one run reporting `--checkpoints` checkpoints, all kept: its page's time cold
  (the history replayed), warm, and its second pages of the kept table and history.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from bench.processor import delete_topics, preload, settings_for, topics
from bench.workload import _event
from ckptlog.broker import ensure_bootstrap
from ckptlog.client.reporter import AsyncReporter
from ckptlog.processor.service.harness import running
from ckptlog.processor.service.settings import ServiceSettings
from ckptlog.processor.ui.server import running as serving
from ckptlog.processor.ui.source import LiveSource


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def sse_runs(session: aiohttp.ClientSession, url: str, seen: asyncio.Queue[tuple[float, list[str]]]) -> None:
    async with session.get(f"{url}/events") as response:
        async for line in response.content:
            if line.startswith(b"data: "):
                await seen.put((time.perf_counter(), json.loads(line[6:])["runs"]))


async def committed(session: aiohttp.ClientSession, url: str, run: str) -> int:
    async with session.get(f"{url}/api/runs/{run}") as response:
        if response.status != 200:
            return -1
        body = await response.json()
        view = body.get("view", body)
        return int(view.get("committed", -1))


async def live_latency(settings: ServiceSettings, url: str, root: Path, reports: int) -> dict[str, float]:
    run, sse_ms, api_ms = "bench-ui-live", [], []
    seen: asyncio.Queue[tuple[float, list[str]]] = asyncio.Queue()
    async with (
        aiohttp.ClientSession() as session,
        AsyncReporter(run, connection=settings, topic=settings.input_topic) as reporter,
    ):
        follower = asyncio.create_task(sse_runs(session, url, seen))
        await reporter.run_started(str(root / run), 5, "loss", "min")
        await asyncio.sleep(1.0)
        for n in range(1, reports + 1):
            while not seen.empty():
                seen.get_nowait()
            await reporter.report({"loss": (n * 7) % 11}, None)
            sent = time.perf_counter()
            while True:
                at, runs = await asyncio.wait_for(seen.get(), 30)
                if run in runs and await committed(session, url, run) >= n:
                    break
            sse_ms.append((at - sent) * 1000)
            api_ms.append((time.perf_counter() - sent) * 1000)
            await asyncio.sleep(0.05)
        follower.cancel()
    return {
        "sse_p50_ms": percentile(sse_ms, 0.5),
        "sse_p99_ms": percentile(sse_ms, 0.99),
        "page_data_p50_ms": percentile(api_ms, 0.5),
        "page_data_p99_ms": percentile(api_ms, 0.99),
        "page_data_max_ms": max(api_ms),
    }


async def many_runs(
    settings: ServiceSettings, url: str, source: LiveSource, root: Path, count: int
) -> dict[str, float]:
    lines = [
        _event(str(uuid.uuid4()), "run_started", f"many-{i:05d}", {"storage_path": str(root / "many" / str(i))})
        for i in range(count)
    ]
    start = time.perf_counter()
    await preload(settings.bootstrap_servers or "", settings.input_topic, lines)
    while sum(run.startswith("many-") for run in source.views()) < count:
        await asyncio.sleep(0.1)
    out = {"runs_visible_s": time.perf_counter() - start}
    async with aiohttp.ClientSession() as session:
        for name, path in (("runs_page_ms", "/"), ("runs_page_50_ms", "/?page=50"), ("api_runs_ms", "/api/runs")):
            best = float("inf")
            for _ in range(3):
                began = time.perf_counter()
                async with session.get(url + path) as response:
                    await response.read()
                    assert response.status == 200, (path, response.status)
                best = min(best, time.perf_counter() - began)
            out[name] = best * 1000
    return out


async def big_run(settings: ServiceSettings, url: str, source: LiveSource, root: Path, count: int) -> dict[str, float]:
    """One run reporting `count` checkpoints (keep all): the run page's time, cold and warm."""
    run, home = "bench-ui-big", root / "big"
    config = {"num_to_keep": None, "checkpoint_score_attribute": "loss", "checkpoint_score_order": "min"}
    lines = [_event(str(uuid.uuid4()), "run_started", run, {"storage_path": str(home), "checkpoint_config": config})]
    lines += [
        _event(
            str(uuid.uuid4()),
            "report",
            run,
            {"metrics": {"loss": (i * 7919) % 1000}, "checkpoint": {"path": str(home / f"c{i}")}},
        )
        for i in range(count)
    ]
    start = time.perf_counter()
    await preload(settings.bootstrap_servers or "", settings.input_topic, lines)
    while source.views().get(run, {}).get("committed", 0) < count:
        await asyncio.sleep(0.1)
    out = {"big_run_visible_s": time.perf_counter() - start}
    async with aiohttp.ClientSession() as session:
        for name in ("big_run_page_cold_ms", "big_run_page_warm_ms", "big_run_page_2_ms"):
            began = time.perf_counter()
            query = "?kept=2&history=2" if name.endswith("_2_ms") else ""
            async with session.get(f"{url}/runs/{run}{query}") as response:
                body = await response.read()
                assert response.status == 200 and b"c9" in body, response.status
            out[name] = (time.perf_counter() - began) * 1000
        out["big_run_page_kib"] = len(body) / 1024
    return out


async def main(args: argparse.Namespace) -> None:
    bootstrap = ensure_bootstrap(None)
    created: list[str] = []
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        root = Path(tmp) / "runs"
        root.mkdir()
        names = await topics(bootstrap, uuid.uuid4().hex[:8], created)
        settings = settings_for(bootstrap, names, Path(tmp), root=root.as_uri())
        try:
            async with running(settings):
                source = LiveSource(settings)
                await source.start()
                try:
                    async with serving(source) as url:
                        figures: dict[str, Any] = {}
                        if args.runs:  # first, so the live figures are taken with that many runs shown
                            figures |= await many_runs(settings, url, source, root, args.runs)
                        figures |= await live_latency(settings, url, root, args.reports)
                        if args.checkpoints:
                            figures |= await big_run(settings, url, source, root, args.checkpoints)
                finally:
                    await source.close()
        finally:
            await delete_topics(bootstrap, created)
    print(json.dumps({"reports": args.reports, "runs": args.runs, **{k: round(v, 1) for k, v in figures.items()}}))


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=100)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--checkpoints", type=int, default=10_000, help="checkpoints of the one big run (0: none)")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))
