"""Running the processor in-process and checking what it published: for the demo, tests and benchmarks.

async with running(settings) as processor:
    await produce_events(conn, settings.input_topic, lines)
    views = await wait_for_views(conn, settings.state_topic, expected_views(lines, settings))
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.producers import produce
from ckptlog.kafka.records import OutRecord
from ckptlog.processor.core.view import View
from ckptlog.processor.foldfile import fold_lines
from ckptlog.processor.service.errors import ServiceError
from ckptlog.processor.service.processor import Processor
from ckptlog.processor.service.settings import ServiceSettings
from ckptlog.processor.service.views import read_views


@asynccontextmanager
async def running(settings: ServiceSettings, ready_timeout_s: float = 30.0) -> AsyncIterator[Processor]:
    """Start a Processor, wait until it holds its first assignment, stop it gracefully on exit."""
    processor = Processor(settings)
    task = asyncio.create_task(processor.run())
    ready = asyncio.create_task(processor.ready.wait())
    done, _ = await asyncio.wait({task, ready}, timeout=ready_timeout_s, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        ready.cancel()
        task.result()  # raises the start-up error
        raise ServiceError("the processor stopped before its first assignment; see the log")
    if ready not in done:
        ready.cancel()
        processor.stop()
        await task
        raise ServiceError(f"the processor got no partitions within {ready_timeout_s}s; is the broker healthy?")
    try:
        yield processor
    finally:
        processor.stop()
        await task


def event_record(topic: str, line: bytes, partition: int | None = None) -> OutRecord:
    """An input record keyed by the event's subject (no key when the line is not a JSON object)."""
    try:
        body = json.loads(line)
        key = body["subject"].encode() if isinstance(body, dict) and isinstance(body.get("subject"), str) else None
    except (ValueError, UnicodeDecodeError):
        key = None
    return OutRecord(topic, key, line, partition=partition)


async def produce_events(conn: KafkaConnection, topic: str, lines: Iterable[bytes]) -> None:
    await produce(conn, [event_record(topic, line.rstrip(b"\n")) for line in lines if line.strip()])


def expected_views(lines: Sequence[bytes], settings: ServiceSettings) -> dict[str, View]:
    """What `ckptlog fold` makes of the same events: VIEWs without `evicted`."""
    document: dict[str, Any] = fold_lines(lines, settings.fold_settings()).document()
    return {run_id: {k: v for k, v in view.items() if k != "evicted"} for run_id, view in document["runs"].items()}


async def wait_for_views(
    conn: KafkaConnection, state_topic: str, expected: dict[str, View], timeout_s: float = 30.0
) -> dict[str, View]:
    """Poll the state topic until it equals `expected`; returns the last read either way."""
    deadline = time.monotonic() + timeout_s
    while True:
        views = await read_views(conn, state_topic)
        if _same(views, expected) or time.monotonic() > deadline:
            return views
        await asyncio.sleep(0.25)


def _same(a: dict[str, View], b: dict[str, View]) -> bool:
    """Equality that treats NaN metrics as equal (JSON round trips keep them as NaN)."""
    return json.dumps(a, sort_keys=True, allow_nan=True) == json.dumps(b, sort_keys=True, allow_nan=True)


def _event(event_id: str, kind: str, run_id: str, data: dict[str, Any]) -> bytes:
    body = {
        "specversion": "1.0",
        "id": event_id,
        "source": "harness",
        "type": f"ckptlog.{kind}.v1",
        "subject": run_id,
        "data": data,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def workload(
    root: str, *, runs: int = 4, reports: int = 200, keep: int | None = 2, validation_share: float = 0.2, seed: int = 1
) -> list[bytes]:
    """A deterministic event log: run_started per run, checkpoint reports (some asking for validation,
    answered a few reports later), an occasional worker-group restart. Paths are `{root}/run-i/ckpt-n`."""
    import random

    rng = random.Random(seed)
    lines = [
        _event(
            f"start-{r}",
            "run_started",
            f"run-{r}",
            {
                "storage_path": f"{root}/run-{r}",
                "checkpoint_config": {"num_to_keep": keep, "checkpoint_score_attribute": "acc"},
            },
        )
        for r in range(runs)
    ]
    waiting: list[tuple[int, str, str]] = []
    for i in range(reports):
        run_id, path = f"run-{i % runs}", f"{root}/run-{i % runs}/ckpt-{i:06d}"
        validate = rng.random() < validation_share
        lines.append(
            _event(
                f"rep-{i}",
                "report",
                run_id,
                {
                    "metrics": {"acc": round(rng.random(), 4), "step": i},
                    "checkpoint": {"path": path},
                    "validation": validate,
                },
            )
        )
        if validate:
            waiting.append((i + rng.randint(2, 3 * runs), run_id, path))
        while waiting and waiting[0][0] <= i:
            _, vrun, vpath = waiting.pop(0)
            status = "VALIDATED" if rng.random() < 0.8 else "VALIDATION_FAILED"
            lines.append(
                _event(
                    f"val-{vpath}",
                    "validation_result",
                    vrun,
                    {"checkpoint_path": vpath, "status": status, "metrics": {"acc": round(rng.random(), 4)}},
                )
            )
        if rng.random() < 0.01:
            lines.append(_event(f"restart-{i}", "worker_group_restart", run_id, {"num_workers": 2}))
    return lines


def checkpoint_paths(lines: Iterable[bytes]) -> list[str]:
    """Every checkpoint path reported in `lines` (to create the directories a test needs)."""
    paths = []
    for line in lines:
        try:
            body = json.loads(line)
            checkpoint = body["data"].get("checkpoint") if body.get("type") == "ckptlog.report.v1" else None
        except (ValueError, AttributeError, KeyError, TypeError):
            continue
        if isinstance(checkpoint, dict) and isinstance(checkpoint.get("path"), str):
            paths.append(checkpoint["path"])
    return paths


ROLES = ("input", "checkpoints", "validations", "watermarks", "state", "dlq")


def run_argv(settings: ServiceSettings, **flags: object) -> list[str]:
    """`ckptlog run` as a subprocess with these settings' broker, group, roots, snapshots and topics,
    plus `flags` (`snapshot_every=50` is `--snapshot-every 50`; they win over the settings')."""
    values: dict[str, object] = {
        "bootstrap_servers": settings.bootstrap_servers,
        "snapshots": settings.snapshots,
        "storage_root": settings.storage_root,
        "group_id": settings.group_id,
        **{f"{role}_topic": getattr(settings, f"{role}_topic") for role in ROLES},
        **flags,
    }
    argv = [sys.executable, "-m", "ckptlog.cli", "run"]
    for name, value in values.items():
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", str(value)]
    return argv
