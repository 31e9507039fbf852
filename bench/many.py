"""Many runs at once (issue 24, item 5): `python -m bench.many --runs 10000 --kept 5`.

One `ckptlog run` process (exactly_once, one input partition, its own topics on the broker) takes
`--runs` concurrent active runs: first each run's run_started and one report (1 kept checkpoint:
`num_to_keep` unset, so nothing is evicted and nothing is deleted), then `--kept - 1` more
reports each, round robin over the runs. After each phase, once the group's committed offset is
the input's end and has stayed there for a few seconds, the processor's RSS (VmRSS of the
process, as the kernel sees it: no gc is forced in it) is read; so

    per kept checkpoint = (RSS after phase 2 - RSS after phase 1) / (runs * (kept - 1))
    per run             = (RSS after phase 1 - RSS idle) / runs - per kept checkpoint

Then (unless `--restart-hold -1`) the processor is stopped (SIGTERM: its final snapshot) and a new
one of the same group restores the whole state and is held `--restart-hold` seconds at the default
session timeout; the log's partitions_assigned/revoked/restored lines count the rebalances (one per
process when none was forced by a blocked event loop). The runs' roots, where their claims are
written, lie in a temporary directory of the invocation.

(a kept checkpoint's cost includes its report's event id: `--ids foreign`, the default, remembered one
by one; `--ids structured`, a Reporter's ids, remembered as one range per run). Then the
readers against the state topic holding `--runs` VIEWs, wall time of the whole command (a new
process: imports included), best of `--repeat`: `ckptlog inspect --json` (every VIEW),
`ckptlog inspect` (tables, its default 100 runs), `inspect --prefix` (10 runs), `inspect RUN`
and `ckptlog watch RUN --once`. Each reads the state topic from its start (ckptlog/processor/views.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.processor import ckptlog_run, delete_topics, preload, settings_for, topics, wait_for_line
from ckptlog.broker import ensure_bootstrap
from ckptlog.processor.service.settings import ServiceSettings

QUIET_S = 3.0  # the committed offset stays at the end this long before RSS is read


def _line(eid: str, kind: str, run: str, data: dict[str, object]) -> bytes:
    envelope = {"specversion": "1.0", "id": eid, "source": "bench", "type": f"ckptlog.{kind}.v1", "subject": run}
    return json.dumps({**envelope, "data": data}, separators=(",", ":")).encode()


def run_id(number: int) -> str:
    return f"run-{number:05d}"


def first_phase(runs: int, ids: str, root: str) -> list[bytes]:
    """Every run's run_started (keep every checkpoint, ranked by acc) and its first report."""
    config = {"num_to_keep": None, "checkpoint_score_attribute": "acc", "checkpoint_score_order": "max"}
    lines = [
        _line(f"s-{n}", "run_started", run_id(n), {"storage_path": f"{root}/{run_id(n)}", "checkpoint_config": config})
        for n in range(runs)
    ]
    return lines + reports(runs, 0, 1, ids, root)


def reports(runs: int, start: int, stop: int, ids: str, root: str) -> list[bytes]:
    """Reports number start..stop-1 of every run, round robin (report i of every run, then i+1);
    `ids` "structured": a Reporter's (`ck1:r:0:{i}:{run}`, contract §3 "Deduplication")."""
    lines = []
    for i in range(start, stop):
        for n in range(runs):
            path = f"{root}/{run_id(n)}/ckpt-{i:04d}"
            data = {"metrics": {"acc": (n * 31 + i * 7) % 101 / 100, "step": i}, "checkpoint": {"path": path}}
            event_id = f"ck1:r:0:{i}:{run_id(n)}" if ids == "structured" else f"r-{n}-{i}"
            lines.append(_line(event_id, "report", run_id(n), data))
    return lines


def rss(pid: int) -> int:
    """VmRSS of the process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


async def committed_at_end(settings: ServiceSettings, end: int, timeout_s: float = 900.0) -> float:
    """Seconds until the group's committed offset reached `end`, after which it stayed there QUIET_S."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_servers, group_id=settings.group_id)
    await consumer.start()
    tp, begin, reached = TopicPartition(settings.input_topic, 0), time.perf_counter(), None
    try:
        while reached is None or time.perf_counter() - reached < QUIET_S:
            if time.perf_counter() - begin > timeout_s:
                raise TimeoutError(f"the processor did not commit offset {end} in {timeout_s} s")
            if reached is None and (await consumer.committed(tp) or 0) >= end:
                reached = time.perf_counter()
            await asyncio.sleep(0.2)
        return reached - begin
    finally:
        await consumer.stop()


def start(settings: ServiceSettings, log: Path, mode: str = "wb") -> subprocess.Popen[bytes]:
    with log.open(mode) as out:
        return subprocess.Popen(ckptlog_run(settings), stdout=out, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen[bytes]) -> float:
    """SIGTERM (a graceful close: the final snapshot), seconds until the process exited."""
    t0 = time.perf_counter()
    proc.terminate()
    proc.wait(timeout=300)
    return round(time.perf_counter() - t0, 1)


async def processor_side(
    settings: ServiceSettings, log: Path, root: str, runs: int, kept: int, ids: str
) -> dict[str, Any]:
    """The two phases through one `ckptlog run` (its log to `log`), its RSS after each."""
    proc = start(settings, log)
    try:
        await wait_for_line(log, b"event=caught_up", timeout_s=120)
        await asyncio.sleep(QUIET_S)
        idle = rss(proc.pid)
        phases = []
        for lines in (first_phase(runs, ids, root), reports(runs, 1, kept, ids, root)):
            sent = time.perf_counter()
            end = await preload(settings.bootstrap_servers or "", settings.input_topic, lines)
            produce_s = time.perf_counter() - sent
            done_s = await committed_at_end(settings, end)
            phases.append({"events": len(lines), "end": end, "produce_s": round(produce_s, 1), "s": round(done_s, 1)})
            phases[-1]["rss_mib"] = round(rss(proc.pid) / 2**20, 1)
    finally:
        stop_s = stop(proc)
    one, two = (p["rss_mib"] * 2**20 for p in phases)
    per_ckpt = (two - one) / (runs * (kept - 1)) if kept > 1 else 0.0
    per_run = (one - idle) / runs - per_ckpt
    return {
        "idle_rss_mib": round(idle / 2**20, 1),
        "phases": phases,
        "per_run_b": round(per_run),
        "per_kept_b": round(per_ckpt),
        "stop_s": stop_s,
    }


def stamp(line: bytes) -> float:
    """The `ts=` of a log line, in seconds since the epoch."""
    text = line.split(b" ", 1)[0].removeprefix(b"ts=").decode()
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def rebalances(text: bytes) -> dict[str, Any]:
    """What the processor's log says about its group membership and restores."""
    lines = text.splitlines()
    assigned = [line for line in lines if b"event=partitions_assigned" in line]
    caught = [line for line in lines if b"event=caught_up" in line]
    return {
        "assigned": len(assigned),
        "revoked": sum(b"event=partitions_revoked" in line for line in lines),
        "restored": sum(b"event=restored" in line for line in lines),
        "restore_dropped": sum(b"event=restore_dropped" in line for line in lines),
        "last_assigned_to_caught_up_s": round(stamp(caught[-1]) - stamp(assigned[-1]), 2) if caught else None,
    }


async def restart_side(settings: ServiceSettings, log: Path, hold_s: float) -> dict[str, Any]:
    """A new `ckptlog run` of the same group restores the state the first one left (its final
    snapshot), then is held `hold_s` (a few session timeouts: a loop blocked longer than one
    would show up as a rebalance in its log)."""
    t0 = time.perf_counter()
    proc = start(settings, log, "ab")
    try:
        await wait_for_line(log, b"event=caught_up", count=2, timeout_s=900)
        caught_up_s = time.perf_counter() - t0
        rss_caught_up = rss(proc.pid)
        await asyncio.sleep(hold_s)
        held = rss(proc.pid)
    finally:
        stop_s = stop(proc)
    return {
        "caught_up_s": round(caught_up_s, 1),
        "rss_caught_up_mib": round(rss_caught_up / 2**20, 1),
        f"rss_after_{hold_s:g}s_mib": round(held / 2**20, 1),
        "stop_s": stop_s,
    }


def readers(settings: ServiceSettings, runs: int, repeat: int) -> dict[str, Any]:
    """Wall time of each reader command (best of `repeat`), and what `inspect --json` found."""
    cli = [sys.executable, "-m", "ckptlog.cli"]
    where = ["--bootstrap-servers", settings.bootstrap_servers or "", "--state-topic", settings.state_topic]
    inspect = [*cli, "inspect", *where, "--dlq-topic", settings.dlq_topic]
    one = run_id(runs // 2)
    commands = {
        "startup: inspect --help": [*cli, "inspect", "--help"],  # the floor: imports, no broker
        "inspect --json": [*inspect, "--json"],
        "inspect": inspect,
        "inspect --prefix": [*inspect, "--prefix", run_id(runs // 2)[:-1]],
        "inspect RUN": [*inspect, one],
        "watch RUN --once": [*cli, "watch", one, "--once", *where, "--dlq-topic", settings.dlq_topic],
    }
    env = {**os.environ, "CKPTLOG_CHECKPOINTS_TOPIC": settings.checkpoints_topic, "COLUMNS": "160"}
    out: dict[str, Any] = {}
    for name, argv in commands.items():
        times, text = [], ""
        for _ in range(repeat):
            t0 = time.perf_counter()
            text = subprocess.run(argv, check=True, capture_output=True, text=True, env=env).stdout
            times.append(time.perf_counter() - t0)
        out[name] = {"s": round(min(times), 2), "stdout_bytes": len(text.encode())}
        if name == "inspect --json":
            body = json.loads(text)
            out[name]["views"] = len(body["runs"])
            out[name]["kept_checkpoints"] = sum(len(v["checkpoints"]) for v in body["runs"].values())
    return out


async def measure(
    bootstrap: str, runs: int, kept: int, repeat: int, keep_topics: bool, ids: str, hold_s: float, log: Path | None
) -> dict[str, Any]:
    created: list[str] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            names = await topics(bootstrap, f"many-{uuid.uuid4().hex[:6]}", created)
            root, log = f"file://{tmp}/root", log or Path(tmp) / "run.log"  # the claims go below root
            settings = settings_for(bootstrap, names, Path(tmp), root=root)
            side = await processor_side(settings, log, root, runs, kept, ids)
            if hold_s >= 0:
                side["restart"] = await restart_side(settings, log, hold_s)
            side["log"] = rebalances(log.read_bytes())
            found = {"processor": side, "readers": readers(settings, runs, repeat) if repeat else "not run"}
            return {"runs": runs, "kept": kept, "ids": ids, **found, "topics": created if keep_topics else "deleted"}
    finally:
        if not keep_topics:
            await delete_topics(bootstrap, created)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", help="default: the local broker (`ckptlog broker start`)")
    parser.add_argument("--runs", type=int, default=10_000, help="concurrent active runs")
    parser.add_argument("--kept", type=int, default=5, help="kept checkpoints per run at the end (>= 2)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each reader command (the best; 0: none)")
    parser.add_argument("--ids", choices=("foreign", "structured"), default="foreign", help="the reports' event ids")
    parser.add_argument("--keep-topics", action="store_true", help="leave the topics (to profile a reader)")
    parser.add_argument(
        "--restart-hold",
        type=float,
        default=30.0,
        help="restart the processor (a restore of the whole state), hold it this long (s; -1: no restart)",
    )
    parser.add_argument("--log", type=Path, help="write the processor's log here (default: a temporary file)")
    args = parser.parse_args()
    bootstrap = args.bootstrap_servers or ensure_bootstrap(None)
    found = asyncio.run(
        measure(bootstrap, args.runs, args.kept, args.repeat, args.keep_topics, args.ids, args.restart_hold, args.log)
    )
    print(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
