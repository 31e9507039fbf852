"""Incremental snapshots on a real broker (issue 39 item 3): `python -m bench.incremental_broker`.

1. restore: `--restore-runs` (100,000) runs (run_started and one report each), then `--restore-tail`
   (25,000) reports to 100 of them, are folded by `ckptlog run` (snapshot every `--restore-every`
   events: a base of every run and small deltas, the steady state of a fleet), which is then killed
   with SIGKILL; a new processor in this process restores the newest restore point and replays the
   rest: time to caught-up (target: at most 3 s) and the CPU this process spent on it (the broker's
   is not in it), and as a new process (spawn -> caught_up); and reading and decoding the restore
   point alone.
2. latency: a fleet of `--runs` (10,000) long-lived runs (bench.incremental's: `--reports` reports
   each, keep 5) is folded by `ckptlog run` (snapshot every `--latency-every` events, a new base after
   `--deltas` deltas); then reports at `--rate` (1,000/s) for `--seconds` to 10 runs of their own, and
   a read_committed reader of the watermarks topic measures report -> committed watermark (as
   bench.processor's latency). Target: p99 at most 150 ms while snapshots are written; the
   snapshots written meanwhile (bases, deltas, bytes) are counted from the processor's log.
   `--deltas -1 --processor-path DIR`: `ckptlog run` of another checkout (e.g. `git archive main`), no flag.

Each section has topics of its own on the broker (`--bootstrap-servers`, else the local one:
`ckptlog broker start` with CKPTLOG_HOME set), deleted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.incremental import fleet, fresh, report
from bench.latency import percentiles, timed_reports
from bench.processor import delete_topics, preload, scratch_root, settings_for, topics, wait_for_line
from bench.restart import wait_committed
from ckptlog.broker import ensure_bootstrap
from ckptlog.processor.service.harness import run_argv
from ckptlog.processor.service.logs import configure_logging
from ckptlog.processor.service.processor import Processor, tune_gc
from ckptlog.processor.service.restore import read_snapshot
from ckptlog.processor.service.settings import ServiceSettings
from ckptlog.processor.storage.snapshots import SnapshotStore


def tail(runs: int, changed: int, reports: int, root: str) -> list[bytes]:
    """`reports` more reports, round robin over `changed` of the runs (spread over them)."""
    step = max(1, runs // changed)
    return [report(f"new-{(i % changed) * step:07d}", 1 + i // changed, root) for i in range(reports)]


async def restored_in_process(settings: ServiceSettings) -> tuple[float, float, int]:
    """bench.processor's in-process restore, with this process's CPU time up to caught-up too."""
    processor = Processor(settings)
    started, cpu = time.perf_counter(), time.process_time()
    task = asyncio.create_task(processor.run())
    await processor.ready.wait()
    while not (processor.tasks and all(t.life.live for t in processor.tasks.values())):
        await asyncio.sleep(0.002)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    replayed = sum(t.pipeline.publish_from - (t.snapshots.last_offset or 0) for t in processor.tasks.values())
    processor.stop()
    await task
    return elapsed, cpu, replayed


def _argv(settings: ServiceSettings, every: int, deltas: int) -> list[str]:
    flags: dict[str, object] = {"snapshot_every": every, "log_level": "INFO"}
    if deltas >= 0:
        flags["snapshot_deltas"] = deltas
    return run_argv(settings, **flags)


async def restore(args: argparse.Namespace, bootstrap: str, tmp: Path, created: list[str]) -> dict[str, Any]:
    """The runs folded and snapshotted, then a tail of reports to a few of them (small deltas on a
    base of every run: the steady state of a fleet), SIGKILL, restore."""
    names = await topics(bootstrap, uuid.uuid4().hex[:6], created)
    root = scratch_root(tmp, names)
    settings = settings_for(bootstrap, names, tmp, root=root)
    end = await preload(bootstrap, names["input"], fresh(args.restore_runs, root))
    log = tmp / f"restore-{names['input']}.log"
    started = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(_argv(settings, args.restore_every, 32), stdout=out, stderr=out)
    await wait_committed(bootstrap, settings, end)
    end = await preload(bootstrap, names["input"], tail(args.restore_runs, 100, args.restore_tail, root))
    await wait_committed(bootstrap, settings, end)
    build = time.perf_counter() - started
    proc.send_signal(signal.SIGKILL)  # a crash: no final snapshot
    proc.wait()
    written = _snapshots(log.read_text(errors="replace"))
    store = SnapshotStore(settings.snapshots, settings.input_topic, 0)
    cpu, begun = time.process_time(), time.perf_counter()
    snapshot = await asyncio.to_thread(read_snapshot, store, None)  # the part of a restore that reads the chain
    read_s, read_cpu = time.perf_counter() - begun, time.process_time() - cpu
    chain = snapshot.chain if snapshot is not None else None
    del snapshot
    await asyncio.sleep(settings.session_timeout_ms / 1000 + 1)  # the dead member leaves the group
    configure_logging("text", os.environ.get("BENCH_LOG", "CRITICAL"))
    in_process, in_process_cpu, replayed = await restored_in_process(settings)
    configure_logging("text", "CRITICAL")
    seen = log.read_bytes().count(b"event=caught_up")
    with log.open("ab") as out:
        spawned = time.perf_counter()
        proc = subprocess.Popen(_argv(settings, args.restore_every, 32), stdout=out, stderr=out)
    whole = await wait_for_line(log, b"event=caught_up", count=seen + 1, timeout_s=300) - spawned
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=600)  # its final snapshot may be a base of every run
    print(
        f"restore: {args.restore_runs:,} runs, then {args.restore_tail:,} reports to 100 of them ({end:,} events, "
        f"folded in {build:.0f} s; snapshots written: {written}); SIGKILL: {replayed:,} offsets replayed; caught up "
        f"in {in_process:.2f} s in-process, {in_process_cpu:.2f} s of this process's CPU (target <= 3 s); "
        f"{whole:.2f} s as a new process (spawn -> caught_up). Reading and decoding the restore point alone: "
        f"{read_s:.2f} s, {read_cpu:.2f} s CPU ({chain.deltas if chain else 0} deltas, "
        f"{chain.delta_bytes if chain else 0:,} B, on a base of {chain.base_bytes if chain else 0:,} B)",
        flush=True,
    )
    return {"in_process": in_process, "cpu": in_process_cpu, "new_process": whole, "replayed": replayed}


_WRITTEN = re.compile(r"event=snapshot_written .*?kind=(\S+) bytes=(\d+)|event=snapshot_written .*?bytes=(\d+)")


def _snapshots(text: str, after: int = 0) -> str:
    """What the processor's log says it wrote (from byte `after` on): bases, deltas, bytes."""
    bases = deltas = size = 0
    for match in _WRITTEN.finditer(text, after):
        kind, size_one = match[1] or "base", int(match[2] or match[3])
        size += size_one
        if kind == "base":
            bases += 1
        else:
            deltas += 1
    return f"{bases} bases + {deltas} deltas, {size:,} B"


async def latency(args: argparse.Namespace, bootstrap: str, tmp: Path, created: list[str]) -> dict[str, Any]:
    names = await topics(bootstrap, uuid.uuid4().hex[:6], created)
    root = scratch_root(tmp, names)  # the fleet's roots and the reports' (bench.workload's runs) below it
    settings = settings_for(bootstrap, names, tmp, root=root)
    end = await preload(bootstrap, names["input"], list(fleet(args.runs, args.reports, root)))
    log = tmp / f"latency-{names['input']}.log"
    env = {**os.environ, "PYTHONPATH": args.processor_path} if args.processor_path else None
    with log.open("wb") as out:
        argv, cwd = _argv(settings, args.latency_every, args.deltas), tmp if env else None  # not this checkout's
        proc = subprocess.Popen(argv, stdout=out, stderr=out, env=env, cwd=cwd)
    try:
        await wait_committed(bootstrap, settings, end)
        mark = len(log.read_bytes())
        sent, latencies = await timed_reports(bootstrap, names, args.rate, args.seconds, root)
        written = _snapshots(log.read_text(errors="replace"), mark)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=600)
    p50, p99, most = percentiles(latencies)
    print(
        f"latency: {args.runs:,} long-lived runs in the state, {args.rate:,} reports/s for {args.seconds:.0f} s "
        f"({len(latencies):,} answered of {len(sent):,}), snapshot every {args.latency_every:,} events, "
        f"--snapshot-deltas {args.deltas if args.deltas >= 0 else '(none: a build before issue 39)'}; written "
        f"meanwhile: {written}: report -> committed watermark p50 {p50 * 1e3:.0f} ms, p99 {p99 * 1e3:.0f} ms "
        f"(target <= 150 ms), max {most * 1e3:.0f} ms",
        flush=True,
    )
    return {"p50": p50, "p99": p99, "max": most, "written": written}


async def main(args: argparse.Namespace) -> None:
    tune_gc()
    configure_logging("text", "CRITICAL")
    bootstrap = args.bootstrap_servers or ensure_bootstrap(None)
    created: list[str] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            where = Path(args.workdir or tmp)
            if "restore" in args.only:
                await restore(args, bootstrap, where, created)
            if "latency" in args.only:
                await latency(args, bootstrap, where, created)
    finally:
        await delete_topics(bootstrap, created)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--only", default="restore,latency")
    parser.add_argument("--restore-runs", type=int, default=100_000)
    parser.add_argument("--restore-every", type=int, default=10_000, help="restore: snapshot every N events")
    parser.add_argument("--restore-tail", type=int, default=25_000, help="restore: reports to 100 runs after")
    parser.add_argument("--runs", type=int, default=10_000, help="latency: long-lived runs in the state")
    parser.add_argument("--reports", type=int, default=20, help="latency: reports per long-lived run")
    parser.add_argument("--latency-every", type=int, default=2_000, help="latency: snapshot every N events")
    parser.add_argument("--deltas", type=int, default=5, help="latency: --snapshot-deltas (-1: no flag)")
    parser.add_argument(
        "--processor-path",
        default=None,
        help="latency: PYTHONPATH of `ckptlog run`, run outside this checkout (e.g. a sitecustomize putting "
        "another build first)",
    )
    parser.add_argument("--workdir", default=None, help="keep the logs and snapshots here (default: a temp dir)")
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30.0)
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))
