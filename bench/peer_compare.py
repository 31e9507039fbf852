"""ckptlog against a peer doing the same job in Quix Streams (issue 39 item 4(b)):
`python -m bench.peer_compare [--events N] [--repeats R] [--workloads dense,sparse] [--quick]`.

The job: per run a top-K kept set, evictions and watermarks out, exactly-once and at-least-once.
ckptlog is `ckptlog run` as shipped; the peer is bench/quix_peer.py (a Quix Streams Application
folding with bench/peer_fold.py). Per workload, guarantee and repeat, each side gets fresh topics
of one partition on the same broker, the same N events preloaded (bench.processor's dense or
sparse workload), and runs as a process of its own, alone (which goes first alternates between
repeats). Both are timed alike, from outside: the group's committed input offset polled every
20 ms, events/s from the first commit to the commit of the last event (the events of the first
commit are not counted: its time includes start-up and the group join, as in bench.processor).

Then the comparison fails loudly unless the two agree: every run's kept checkpoints (ckptlog: the
last VIEW on its state topic; the peer: its RocksDB state store, read back) in the same order, the
same evicted paths (each side's evictions on its checkpoints topic) and the same last watermark
(committed, validated) per run.

What maps and what does not: commits, every batch of ≤ 20,000 records (ckptlog's default
max_batch_records) for ckptlog, every 20,000 messages or 5 s for Quix (`commit_every`,
`commit_interval`); the guarantee; the input's partition count (1); consumer and producer
settings are each side's defaults (aiokafka for ckptlog, confluent-kafka/librdkafka for Quix).
Not the same work: ckptlog's checkpoints exist on disk and it deletes each evicted one, it also
writes checkpoint_registered, validation_requested and VIEWs, snapshots every 10,000 events,
deduplicates event ids and checks every path (contract §3, §9); the peer writes one watermark per
event (a message-at-a-time engine has no batch to coalesce them over) and keeps its state in
RocksDB with a changelog topic (Quix's fault tolerance). The machine is shared: compare the
ratio of one run, not rates across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import GroupCoordinatorNotAvailableError

from bench import processor as proc
from ckptlog.broker import ensure_bootstrap
from ckptlog.processor.service.harness import run_argv
from ckptlog.processor.service.logs import configure_logging

GUARANTEES = {"exactly_once": "exactly-once", "at_least_once": "at-least-once"}  # ckptlog's name -> Quix's
TARGET = 1.5  # issue 39 item 4(b): ckptlog ≥ 1.5× the peer
POLL_S = 0.02


@dataclass
class Timed:
    rate: float  # events/s, first commit -> the last event committed
    cpu_us: float  # the process's CPU time (user + system, all its threads) per timed event


@dataclass
class Outcome:
    timed: Timed
    kept: dict[str, list[str]]  # run -> kept paths in sort order, best last
    evicted: dict[str, set[str]]  # run -> evicted paths
    watermarks: dict[str, tuple[int, int]]  # run -> the last (committed, validated)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far, all its threads (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def timed(bootstrap: str, group: str, topic: str, end: int, child: subprocess.Popen[bytes]) -> Timed:
    """Events/s (and CPU per event) from the group's first commit on `topic` to its commit of offset `end`.
    The CPU time is the less noisy figure on a shared host: other work slows the wall clock, not it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    started, first, cpu = 0.0, 0, 0.0
    try:
        while True:
            try:
                offsets = await admin.list_consumer_group_offsets(group)
            except GroupCoordinatorNotAvailableError:  # the group is not there yet
                offsets = {}
            committed = max((m.offset for tp, m in offsets.items() if tp.topic == topic), default=0)
            now = time.perf_counter() - POLL_S / 2
            if committed > 0 and not first:
                started, first, cpu = now, committed, cpu_s(child.pid)
            if committed >= end:
                if first >= end:
                    raise SystemExit(f"bench.peer_compare: {group} committed all {end} events at once: nothing timed")
                return Timed((end - first) / (now - started), (cpu_s(child.pid) - cpu) / (end - first) * 1e6)
            if child.poll() is not None:
                raise SystemExit(
                    f"bench.peer_compare: {group}'s process exited {child.returncode} at {committed}/{end}"
                )
            await asyncio.sleep(POLL_S)
    finally:
        await admin.close()


async def read_topic(bootstrap: str, topic: str) -> list[tuple[str, dict[str, Any]]]:
    """Every committed (key, value) of a one-partition topic, decoded, in order (tombstones left out)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False)
    await consumer.start()
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    await consumer.seek_to_beginning(tp)
    end = (await consumer.end_offsets([tp]))[tp]
    values: list[tuple[str, dict[str, Any]]] = []
    try:
        while await consumer.position(tp) < end:
            for records in (await consumer.getmany(tp, timeout_ms=500, max_records=50_000)).values():
                values += [(r.key.decode(), json.loads(r.value)) for r in records if r.key and r.value is not None]
    finally:
        await consumer.stop()
    return values


def evictions(values: list[tuple[str, dict[str, Any]]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for _, value in values:
        if value["type"].startswith("ckptlog.checkpoint_evicted."):
            out.setdefault(value["subject"], set()).add(value["data"]["checkpoint_path"])
    return out


def last_watermarks(values: list[tuple[str, dict[str, Any]]]) -> dict[str, tuple[int, int]]:
    """The highest (committed, validated) per run: they only grow (an at-least-once repeat may come late)."""
    out: dict[str, tuple[int, int]] = {}
    for _, value in values:
        mark = (value["data"]["committed"], value["data"]["validated"])
        out[value["subject"]] = max(out.get(value["subject"], mark), mark)
    return out


async def ckptlog_side(bootstrap: str, tmp: Path, lines: list[bytes], guarantee: str, created: list[str]) -> Outcome:
    """`ckptlog run`, its checkpoints on disk under tmp/runs (each eviction a real deletion)."""
    names = await proc.topics(bootstrap, uuid.uuid4().hex[:6], created)
    end = await proc.preload(bootstrap, names["input"], lines)
    tree = tmp / "runs"
    proc.materialize(lines, tree)
    settings = proc.settings_for(bootstrap, names, tmp, root=tree.as_uri(), guarantee=guarantee)
    argv = run_argv(settings, snapshot_every=settings.snapshot_every, log_level="WARNING", guarantee=guarantee)
    with (tmp / f"ckptlog-{names['input']}.log").open("wb") as log:
        child = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        took = await timed(bootstrap, settings.group_id, names["input"], end, child)
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=120)
    views = {run: kept_paths(view) for run, view in await read_topic(bootstrap, names["state"])}
    checkpoints, marks = [await read_topic(bootstrap, names[role]) for role in ("checkpoints", "watermarks")]
    return Outcome(took, views, evictions(checkpoints), last_watermarks(marks))


def kept_paths(view: dict[str, Any]) -> list[str]:
    if "pages" in view:  # more than 256 kept: the workloads keep 5
        raise SystemExit("bench.peer_compare: a paged VIEW; assemble it (ckptlog.events.view.assemble) first")
    return [c["path"] for c in view["checkpoints"]]


async def peer_side(bootstrap: str, tmp: Path, lines: list[bytes], guarantee: str, created: list[str]) -> Outcome:
    """The Quix Streams application of bench/quix_peer.py, a process of its own."""
    names = await proc.topics(bootstrap, uuid.uuid4().hex[:6], created)
    end = await proc.preload(bootstrap, names["input"], lines)
    group, kept_file = f"peer-{names['input']}", tmp / f"kept-{names['input']}.json"
    argv = [sys.executable, "-m", "bench.quix_peer", "--bootstrap-servers", bootstrap, "--group", group]
    argv += ["--guarantee", GUARANTEES[guarantee], "--end", str(end), "--kept", str(kept_file)]
    argv += ["--state-dir", str(tmp / f"quix-{names['input']}")]
    argv += [f"--{role}={names[role]}" for role in ("input", "checkpoints", "watermarks")]
    with (tmp / f"peer-{names['input']}.log").open("wb") as log:
        child = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        took = await timed(bootstrap, group, names["input"], end, child)
        if await asyncio.to_thread(child.wait, 120):
            raise SystemExit(f"bench.peer_compare: the peer exited {child.returncode}; see {log.name}")
    finally:
        if child.poll() is None:
            child.kill()
    created.append(f"changelog__{group}--{names['input']}--default")  # Quix's changelog topic of its store
    checkpoints, marks = [await read_topic(bootstrap, names[role]) for role in ("checkpoints", "watermarks")]
    return Outcome(took, json.loads(kept_file.read_text()), evictions(checkpoints), last_watermarks(marks))


def disagreement(ours: Outcome, peer: Outcome) -> str | None:
    """Where the peer's outcome differs from ckptlog's, or None."""
    for what in ("kept", "evicted", "watermarks"):
        mine, theirs = getattr(ours, what), getattr(peer, what)
        for run in sorted(set(mine) | set(theirs)):
            if mine.get(run) != theirs.get(run):
                return f"{what} of {run!r}: ckptlog {_short(mine.get(run))}, the peer {_short(theirs.get(run))}"
    return None


def _short(value: object) -> str:
    if isinstance(value, set):
        value = sorted(value)
    text = repr(value)
    return text if len(text) < 300 else f"{text[:300]}… ({len(value) if isinstance(value, list) else '?'} items)"


async def compare(
    bootstrap: str, tmp: Path, count: int, workload: str, guarantee: str, peer_first: bool
) -> dict[str, Any]:
    """One side-by-side run: prints both rates and the ratio, checks the outcomes; returns the figures."""
    lines = proc.WORKLOADS[workload][1](count, root=(tmp / "runs").as_uri())
    sides = {"ckptlog": ckptlog_side, "peer": peer_side}
    order = ["peer", "ckptlog"] if peer_first else ["ckptlog", "peer"]
    created: list[str] = []
    try:
        outcome = {side: await sides[side](bootstrap, tmp, lines, guarantee, created) for side in order}
    finally:  # after each comparison: a long run leaves no pile of topics on the broker
        await proc.delete_topics(bootstrap, created)
    wrong = disagreement(outcome["ckptlog"], outcome["peer"])
    if wrong is not None:
        raise SystemExit(f"bench.peer_compare: ckptlog and the peer disagree ({workload}, {guarantee}): {wrong}")
    ours, theirs = outcome["ckptlog"].timed, outcome["peer"].timed
    kept = sum(map(len, outcome["ckptlog"].kept.values()))
    evicted = sum(map(len, outcome["ckptlog"].evicted.values()))
    print(
        f"{workload:<6} {guarantee:<13} ckptlog {ours.rate:>7,.0f}/s {ours.cpu_us:>4.0f} µs CPU/event | "
        f"Quix Streams peer {theirs.rate:>7,.0f}/s {theirs.cpu_us:>4.0f} µs | ratio {ours.rate / theirs.rate:.2f} "
        f"(target ≥ {TARGET}), CPU {theirs.cpu_us / ours.cpu_us:.2f} | {'peer' if peer_first else 'ckptlog'} first; "
        f"agree on {len(outcome['ckptlog'].kept)} runs, {kept} kept, {evicted:,} evicted; "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return {
        "workload": workload,
        "guarantee": guarantee,
        "events": count,
        "ckptlog": ours.rate,
        "peer": theirs.rate,
        "ckptlog_cpu_us": ours.cpu_us,
        "peer_cpu_us": theirs.cpu_us,
        "peer_first": peer_first,
        "kept": kept,
        "evicted": evicted,
        "load": os.getloadavg()[0],
    }


async def measure(
    bootstrap: str, tmp: Path, count: int, repeats: int, workloads: list[str], guarantees: list[str]
) -> list[dict[str, Any]]:
    """Every workload × guarantee, `repeats` times, who goes first alternating."""
    rows = []
    for repeat in range(repeats):
        for workload in workloads:
            for guarantee in guarantees:
                rows.append(await compare(bootstrap, tmp, count, workload, guarantee, repeat % 2 == 1))
    return rows


async def main(args: argparse.Namespace) -> None:
    configure_logging("text", "CRITICAL")
    bootstrap = args.bootstrap_servers or ensure_bootstrap(None)
    print(f"ckptlog against a Quix Streams peer, {args.events:,} events per run, 10 runs, 1 partition, {bootstrap}")
    with tempfile.TemporaryDirectory() as tmp:
        await measure(bootstrap, Path(tmp), args.events, args.repeats, args.workloads, args.guarantees)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    p.add_argument("--events", type=int, help="events preloaded per run (default 100,000; --quick 45,000)")
    p.add_argument("--repeats", type=int, help="runs of each workload and guarantee (default 3; --quick 1)")
    p.add_argument("--workloads", type=lambda s: s.split(","), default=["dense", "sparse"])
    p.add_argument("--guarantees", type=lambda s: s.split(","), default=list(GUARANTEES))
    p.add_argument("--quick", action="store_true", help="a smoke run: 45,000 events, once, dense only")
    args = p.parse_args(argv)
    if args.quick:
        args.workloads = ["dense"] if args.workloads == ["dense", "sparse"] else args.workloads
    args.events = args.events or (45_000 if args.quick else 100_000)
    args.repeats = args.repeats or (1 if args.quick else 3)
    return args


if __name__ == "__main__":
    asyncio.run(main(parse()))
