"""What `ckptlog run --metrics-port` serves: `/metrics`, `/healthz`, `/readyz`.

The HTTP server runs in a thread of its own (wsgiref, one thread per request), so it answers
even while the event loop is busy — and can then say the loop is stuck, instead of timing out.
Everything it reports about the processor is read *on* the event loop (`_on_loop`), the only
thread that may look at partitions, folds and the deleter: at each scrape the state gauges
(lag, offsets, kept checkpoints, snapshot age, deletion backlog, ...) are computed afresh, so
they cost nothing between scrapes and a revoked partition's series simply disappear.

- `/healthz`: 200 while the event loop answers within `LOOP_TIMEOUT_S` and the poll loop went
  round within `STALL_S` (process alive, loop not stuck); else 503 saying which.
- `/readyz`: 200 once every assigned partition is restored and its fold reached the group's
  committed offset (`Processor.readiness`); 503 before, while a restore is retried, and stopping.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import asynccontextmanager
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import StartResponse, WSGIEnvironment

from prometheus_client import make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ckptlog.errors import CkptlogError, ConfigError
from ckptlog.processor.service.metrics import HOOKED, PrometheusMetrics

if TYPE_CHECKING:
    from ckptlog.processor.service.partition import PartitionTask
    from ckptlog.processor.service.processor import Processor

log = logging.getLogger(__name__)

T = TypeVar("T")

LOOP_TIMEOUT_S = 5.0
"""/healthz fails when the event loop does not run a callback within this long."""
STALL_S = 120.0
"""/healthz fails when the poll loop has not gone round for this long (a wait that never ends)."""
REFRESH_TIMEOUT_S = 3.0
"""A scrape waits this long for the state gauges (log end offsets come from the broker)."""

PARTITION = ("topic", "partition")
STATE = {
    "ckptlog_ready": ("gauge", (), "1 when every assigned partition is restored and caught up (/readyz)."),
    "ckptlog_assigned_partitions": ("gauge", (), "Input partitions assigned to this instance."),
    "ckptlog_consumer_lag": ("gauge", PARTITION, "Input records after the committed offset (log end - committed)."),
    "ckptlog_last_folded_offset": ("gauge", PARTITION, "Offset of the last input record folded."),
    "ckptlog_committed_offset": ("gauge", PARTITION, "Next input offset to commit: everything below is durable."),
    "ckptlog_partition_caught_up": ("gauge", PARTITION, "1 once the fold reached the committed offset at restore."),
    "ckptlog_runs": ("gauge", PARTITION, "Runs in the partition's state."),
    "ckptlog_kept_checkpoints": ("gauge", PARTITION, "Kept checkpoints over the partition's runs."),
    "ckptlog_pending_validations": ("gauge", PARTITION, "Checkpoints waiting for a validation result."),
    "ckptlog_outstanding_deletions": ("gauge", PARTITION, "Evictions the state still owes a deletion for."),
    "ckptlog_snapshot_age_seconds": (
        "gauge",
        PARTITION,
        "Seconds since the last snapshot was written (none yet: since the partition was assigned).",
    ),
    "ckptlog_snapshot_bytes": ("gauge", PARTITION, "Size of the last snapshot written."),
    "ckptlog_snapshot_offset": ("gauge", PARTITION, "Input offset the newest snapshot resumes from."),
    "ckptlog_deletion_backlog": ("gauge", (), "Deletions accepted and not yet confirmed (queued, running, retried)."),
    "ckptlog_deletions_failing": ("gauge", (), "Deletions whose attempts are exhausted (retried every 30 s)."),
    "ckptlog_deletions_total": ("counter", (), "Evicted checkpoints deleted (confirmed gone)."),
    "ckptlog_deletion_failures_total": ("counter", (), "Failed deletion attempts (each is retried)."),
    "ckptlog_deletions_refused_total": ("counter", (), "Deletions refused for good (unsafe path); none touched."),
    "ckptlog_deletions_dropped_total": ("counter", (), "Deletions dropped by the re-check (live again, not owned)."),
    "ckptlog_root_claims_total": (
        "counter",
        ("outcome",),
        "Run roots claimed: a claim file in {root}/.ckptlog-run/ (outcome: claimed, shared — another run claims "
        "the root or one above it —, refused — reached through a symlink —, failed attempts).",
    ),
    "ckptlog_rebuilds_total": ("counter", (), "Partitions restored again after a failed commit."),
    "ckptlog_rejoins_total": ("counter", (), "Group rejoins after this instance was fenced."),
}
"""Families computed at each scrape: name -> (type, labels, help)."""


EXPORTED = frozenset(HOOKED) | frozenset(STATE)
"""Every ckptlog_ family the processor exports (histograms add _bucket, _sum and _count series)."""


@runtime_checkable
class DeleterStats(Protocol):
    """What ckptlog.processor.storage.deletion.Deleter exposes for the metrics."""

    @property
    def backlog(self) -> int: ...

    @property
    def failing(self) -> int: ...

    @property
    def counts(self) -> object: ...


@runtime_checkable
class ClaimStats(Protocol):
    """What ckptlog.processor.storage.claim_writer.ClaimWriter exposes for the metrics."""

    @property
    def counts(self) -> object: ...


class StateCollector(Collector):
    """Hands prometheus-client the families computed by the last `refresh` (on the event loop)."""

    def __init__(self) -> None:
        self.families: list[Metric] = []

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)

    def describe(self) -> Iterable[Metric]:
        return ()


def _family(name: str) -> GaugeMetricFamily | CounterMetricFamily:
    kind, labels, text = STATE[name]
    if kind == "counter":
        return CounterMetricFamily(name.removesuffix("_total"), text, labels=list(labels))
    return GaugeMetricFamily(name, text, labels=list(labels))


def _partition_values(task: PartitionTask, now: float) -> dict[str, float]:
    kept = pending = owed = 0
    for run in task.fold.runs.values():  # restored runs not built yet answer from their entries (DormantRun)
        run_kept, run_pending, run_owed = run.live_counts()
        kept += run_kept
        pending += run_pending
        owed += run_owed
    snapshots = task.snapshots
    values = {
        "ckptlog_last_folded_offset": task.pipeline.folded_offset - 1,
        "ckptlog_committed_offset": task.pipeline.next_offset,
        "ckptlog_partition_caught_up": float(task.life.live),
        "ckptlog_runs": len(task.fold.runs),
        "ckptlog_kept_checkpoints": kept,
        "ckptlog_pending_validations": pending,
        "ckptlog_outstanding_deletions": owed,
        "ckptlog_snapshot_age_seconds": max(0.0, now - snapshots.written_at),
    }
    if snapshots.last_bytes is not None:
        values["ckptlog_snapshot_bytes"] = snapshots.last_bytes
    if snapshots.last_offset is not None:
        values["ckptlog_snapshot_offset"] = snapshots.last_offset
    return values


async def _log_ends(processor: Processor, tasks: list[PartitionTask]) -> list[int | None]:
    """Each partition's log end (last stable offset), None where the broker did not say in time."""
    consumer = processor.consumer
    if consumer is None:
        return [None] * len(tasks)

    async def end(task: PartitionTask) -> int | None:
        try:
            return await asyncio.wait_for(consumer.log_end(task.pid), REFRESH_TIMEOUT_S / 2)
        except (CkptlogError, TimeoutError):
            return None

    return list(await asyncio.gather(*(end(task) for task in tasks)))


async def state_families(processor: Processor) -> list[Metric]:
    """Every family in `STATE`, read from the processor now (on the event loop)."""
    families = {name: _family(name) for name in STATE}
    ready, _ = processor.readiness()
    families["ckptlog_ready"].add_metric([], float(ready))
    families["ckptlog_assigned_partitions"].add_metric([], len(processor.assigned))
    tasks = [processor.tasks[pid] for pid in sorted(processor.tasks)]
    now = time.monotonic()
    for task, end in zip(tasks, await _log_ends(processor, tasks), strict=True):
        labels = [task.pid.topic, str(task.pid.partition)]
        values = _partition_values(task, now)
        if end is not None:
            values["ckptlog_consumer_lag"] = max(0, end - task.pipeline.next_offset)
        for name, value in values.items():
            families[name].add_metric(labels, value)
    deleter = processor.deleter
    if isinstance(deleter, DeleterStats):
        counts = deleter.counts
        families["ckptlog_deletion_backlog"].add_metric([], deleter.backlog)
        families["ckptlog_deletions_failing"].add_metric([], deleter.failing)
        for name, attribute in (
            ("ckptlog_deletions_total", "deleted"),
            ("ckptlog_deletion_failures_total", "failed"),
            ("ckptlog_deletions_refused_total", "refused"),
            ("ckptlog_deletions_dropped_total", "dropped"),
        ):
            families[name].add_metric([], getattr(counts, attribute))
    claims = processor.claims
    if isinstance(claims, ClaimStats):
        for outcome in ("claimed", "shared", "refused", "failed"):
            families["ckptlog_root_claims_total"].add_metric([outcome], getattr(claims.counts, outcome))
    families["ckptlog_rebuilds_total"].add_metric([], processor.rebuilds)
    families["ckptlog_rejoins_total"].add_metric([], processor.rejoins)
    return list(families.values())


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        log.debug("event=http_request %s", format % args)


class ObserveServer:
    """`/metrics`, `/healthz` and `/readyz` of one processor, served from a thread."""

    def __init__(self, processor: Processor, metrics: PrometheusMetrics, host: str, port: int) -> None:
        self.processor, self.metrics = processor, metrics
        self.collector = StateCollector()
        metrics.add_collector(self.collector)
        self._metrics_app = make_wsgi_app(metrics.registry)
        self._loop = asyncio.get_running_loop()
        server_class = _Server6 if ":" in host else _Server
        try:
            self._server = make_server(host, port, self._app, server_class, _QuietHandler)
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}; choose another --metrics-port "
                "or --metrics-host"
            ) from None
        self._thread = threading.Thread(target=self._server.serve_forever, name="ckptlog-metrics", daemon=True)
        self.url = f"http://{host if ':' not in host else f'[{host}]'}:{self._server.server_port}"

    def start(self) -> None:
        self._thread.start()
        log.info("event=metrics_listening url=%s/metrics health=%s/healthz ready=%s/readyz", *[self.url] * 3)

    async def stop(self) -> None:
        await asyncio.to_thread(self._server.shutdown)
        self._server.server_close()

    # -- in the server's threads -------------------------------------------------------------------

    def _app(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path == "/metrics":
            families = self._on_loop(lambda: state_families(self.processor), REFRESH_TIMEOUT_S)
            if families is not None:
                self.collector.families = families
            return self._metrics_app(environ, start_response)  # type: ignore[no-any-return]
        if path == "/healthz":
            return _text(start_response, *self._health())
        if path == "/readyz":
            ready = self._on_loop(self._readiness, LOOP_TIMEOUT_S)
            return _text(start_response, *(ready or (False, "the event loop did not answer")))
        return _text(start_response, False, "not found: try /metrics, /healthz or /readyz", "404 Not Found")

    def _health(self) -> tuple[bool, str]:
        age = self._on_loop(self._poll_age, LOOP_TIMEOUT_S)
        if age is None:
            return False, f"the event loop did not answer within {LOOP_TIMEOUT_S:.0f} s (stuck, or shutting down)"
        if age > STALL_S:
            return False, f"the poll loop has not gone round for {age:.0f} s (limit {STALL_S:.0f} s)"
        return True, f"ok: event loop answers, last poll {age:.1f} s ago"

    def _on_loop(self, make: Callable[[], Awaitable[T]], timeout: float) -> T | None:
        """Run `make()` on the event loop and wait for it; None when the loop did not answer in time."""

        async def call() -> T:
            return await make()

        coroutine = call()
        try:
            future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        except RuntimeError:  # the loop is closed
            coroutine.close()
            return None
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            return None

    # -- on the event loop -------------------------------------------------------------------------

    async def _poll_age(self) -> float:
        return time.monotonic() - self.processor.last_poll

    async def _readiness(self) -> tuple[bool, str]:
        return self.processor.readiness()


@asynccontextmanager
async def observed(processor: Processor) -> AsyncIterator[ObserveServer | None]:
    """Serve /metrics, /healthz and /readyz while the block runs, if --metrics-port is set."""
    settings = processor.settings
    if settings.metrics_port is None:
        yield None
        return
    server = ObserveServer(processor, processor.metrics, settings.metrics_host, settings.metrics_port)
    server.start()
    try:
        yield server
    finally:
        await server.stop()


def _text(start_response: StartResponse, ok: bool, body: str, status: str | None = None) -> list[bytes]:
    status = status or ("200 OK" if ok else "503 Service Unavailable")
    data = (body + "\n").encode()
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(data)))])
    return [data]
