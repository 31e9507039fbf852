"""The processor's metrics behind one small interface, so the fold stays free of them.

The service calls `ServiceMetrics` hooks once per batch, commit, snapshot or restore (never per
event: a `Batch` carries its per-type counts), and the base class records nothing — the default
for tests and benchmarks that build a `PartitionTask` by hand. `PrometheusMetrics` records them
with prometheus-client in a registry of its own (so several processors in one process, as in the
tests, never share counters). Gauges that describe current state (lag, offsets, kept checkpoints,
snapshot age, deletion backlog) are not updated on the hot path at all: ckptlog/processor/service/observe.py
computes them when Prometheus scrapes.

Every metric is listed in docs/processor.md ("Metrics"); `EXPORTED` names every family the
processor exports, which the dashboard and alert-rule tests check their queries against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR, CollectorRegistry, Counter, Histogram
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ckptlog.events.decoded import INPUT_KINDS
from ckptlog.events.outputs import OUTPUT_KINDS

EVENT_NAMES: dict[type, str] = {kind.struct: kind.name for kind in INPUT_KINDS}
"""Decoded event class -> the `type` label (`report`, `run_started`, ...): the input table's names."""

UNDECODABLE = "invalid"
"""The `type` label of records that did not decode (they are also counted by reason as rejected)."""
VIEW = "view"
"""The `type` label of state-topic records (views and view pages) among the outputs."""
EVENT_LABELS = (*EVENT_NAMES.values(), UNDECODABLE)
OUTPUT_LABELS = (*(kind.name for kind in OUTPUT_KINDS), VIEW)
"""Every `type` label of ckptlog_events_total and ckptlog_outputs_total, from the input and output
tables: each series exists from the start at 0, so `increase()` and `rate()` over a type that has
not happened yet read 0 instead of nothing (alerts.yml's "validations stalled" needs that)."""

SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
RECORD_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 20_000, 50_000)

HOOKED = {
    "ckptlog_events_total": "Input records folded, by CloudEvents type (short name; `invalid`: did not decode).",
    "ckptlog_events_rejected_total": "Input records rejected, by reason code and stage (decode or fold).",
    "ckptlog_events_duplicate_total": "Input events ignored as duplicates (an id already applied to the run).",
    "ckptlog_outputs_total": "Records published, by type: each fold output type, `view` (state records), "
    "`checkpoints_missing`.",
    "ckptlog_dead_letters_total": "Records written to the dead-letter topic, by reason code.",
    "ckptlog_fold_seconds": "Time to decode, fold and build the records of one batch.",
    "ckptlog_batch_records": "Input records per batch (one transaction).",
    "ckptlog_commit_seconds": "Time to make one batch durable (transaction, or publish + offset commit).",
    "ckptlog_transaction_commits_total": "Batches made durable (exactly_once: committed transactions).",
    "ckptlog_transaction_aborts_total": "Commits that failed (exactly_once: aborted transactions); the "
    "partition is restored again.",
    "ckptlog_snapshot_seconds": "Time to encode and write one snapshot.",
    "ckptlog_snapshots_total": "Snapshots written.",
    "ckptlog_snapshot_failures_total": "Snapshot writes that failed (retried at the next due point).",
    "ckptlog_restore_seconds": "Time to restore a partition: snapshot load, checks and seek.",
    "ckptlog_catch_up_seconds": "Time from the start of a partition's restore until its fold reached the "
    "group's committed offset (snapshot load plus replay).",
    "ckptlog_restores_total": "Partition restores that succeeded.",
    "ckptlog_restore_failures_total": "Partition restores that failed for a transient reason (retried).",
    "ckptlog_restores_dropped_total": "Partition restores a rebalance overtook, dropped (the next assignment "
    "restores the partition again).",
    "ckptlog_offset_jumps_total": "First batches of a restored partition that started past the fold's offset, "
    "dropped and re-read from it once (a moved consumer position, or transaction markers).",
}
"""Families updated by the hooks below (name as exposed, with its `_total` suffix)."""


class BatchCounts(Protocol):
    """What a folded batch counted (ckptlog.processor.service.batch.Batch)."""

    @property
    def consumed(self) -> int: ...

    @property
    def duplicates(self) -> int: ...

    @property
    def views(self) -> int: ...

    @property
    def kinds(self) -> Mapping[type, int]: ...

    @property
    def reasons(self) -> Mapping[tuple[str, str], int]: ...

    @property
    def outputs(self) -> Mapping[str, int]: ...

    @property
    def dead(self) -> Mapping[str, int]: ...


class ServiceMetrics:
    """The hooks the service calls; this base records nothing (and costs a method call)."""

    def folded(self, batch: BatchCounts, seconds: float) -> None:
        """One batch folded: its events by decoded class, rejections by (reason, stage), size, time."""

    def committed(self, batch: BatchCounts | None, seconds: float) -> None:
        """One commit succeeded: the batch's outputs by type and dead letters by reason (None: a
        commit of extra outputs only, counted by `extra_outputs`)."""

    def extra_outputs(self, name: str, count: int) -> None:
        """Outputs made outside the fold (checkpoints_missing), counted when they are made."""

    def commit_failed(self) -> None:
        """A commit failed (the transaction was aborted)."""

    def snapshot_written(self, seconds: float) -> None: ...

    def snapshot_failed(self) -> None: ...

    def restored(self, seconds: float) -> None: ...

    def restore_failed(self) -> None: ...

    def restore_dropped(self) -> None: ...

    def offset_jump(self) -> None: ...

    def caught_up(self, seconds: float) -> None: ...


NO_METRICS = ServiceMetrics()


class PrometheusMetrics(ServiceMetrics):
    """prometheus-client metrics in their own registry (`registry`), with the process's own
    (`process_*`: CPU, memory, file descriptors; `python_gc_*`, `python_info`)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        if registry is None:
            registry = CollectorRegistry()
            for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                registry.register(collector)
        self.registry = registry

        def counter(name: str, labels: Iterable[str] = ()) -> Counter:
            return Counter(name.removesuffix("_total"), HOOKED[name], list(labels), registry=registry)

        def histogram(name: str, buckets: Iterable[float]) -> Histogram:
            return Histogram(name, HOOKED[name], buckets=list(buckets), registry=registry)

        self.events = counter("ckptlog_events_total", ["type"])
        self.rejected = counter("ckptlog_events_rejected_total", ["reason", "stage"])
        self.duplicates = counter("ckptlog_events_duplicate_total")
        self.outputs = counter("ckptlog_outputs_total", ["type"])
        self.dead_letters = counter("ckptlog_dead_letters_total", ["reason"])
        self.fold_seconds = histogram("ckptlog_fold_seconds", SECONDS_BUCKETS)
        self.batch_records = histogram("ckptlog_batch_records", RECORD_BUCKETS)
        self.commit_seconds = histogram("ckptlog_commit_seconds", SECONDS_BUCKETS)
        self.commits = counter("ckptlog_transaction_commits_total")
        self.aborts = counter("ckptlog_transaction_aborts_total")
        self.snapshot_seconds = histogram("ckptlog_snapshot_seconds", SECONDS_BUCKETS)
        self.snapshots = counter("ckptlog_snapshots_total")
        self.snapshot_failures = counter("ckptlog_snapshot_failures_total")
        self.restore_seconds = histogram("ckptlog_restore_seconds", SECONDS_BUCKETS)
        self.catch_up_seconds = histogram("ckptlog_catch_up_seconds", SECONDS_BUCKETS)
        self.restores = counter("ckptlog_restores_total")
        self.restore_failures = counter("ckptlog_restore_failures_total")
        self.restores_dropped = counter("ckptlog_restores_dropped_total")
        self.offset_jumps = counter("ckptlog_offset_jumps_total")
        self._children: dict[tuple[Counter, tuple[str, ...]], Counter] = {}
        for label in EVENT_LABELS:
            self._child(self.events, label)
        for label in OUTPUT_LABELS:
            self._child(self.outputs, label)

    def _child(self, metric: Counter, *labels: str) -> Counter:
        """Labelled children, cached: `labels()` takes a lock and builds a tuple each call."""
        key = (metric, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def folded(self, batch: BatchCounts, seconds: float) -> None:
        for kind, count in batch.kinds.items():
            self._child(self.events, EVENT_NAMES.get(kind, UNDECODABLE)).inc(count)
        undecodable = 0
        for (reason, stage), count in batch.reasons.items():
            self._child(self.rejected, reason, stage).inc(count)
            undecodable += count if stage == "decode" else 0
        if undecodable:
            self._child(self.events, UNDECODABLE).inc(undecodable)
        if batch.duplicates:
            self.duplicates.inc(batch.duplicates)
        self.batch_records.observe(batch.consumed)
        self.fold_seconds.observe(seconds)

    def committed(self, batch: BatchCounts | None, seconds: float) -> None:
        self.commits.inc()
        self.commit_seconds.observe(seconds)
        if batch is None:
            return
        for name, count in batch.outputs.items():
            self._child(self.outputs, name).inc(count)
        if batch.views:
            self._child(self.outputs, VIEW).inc(batch.views)
        for reason, count in batch.dead.items():
            self._child(self.dead_letters, reason).inc(count)

    def extra_outputs(self, name: str, count: int) -> None:
        self._child(self.outputs, name).inc(count)

    def commit_failed(self) -> None:
        self.aborts.inc()

    def snapshot_written(self, seconds: float) -> None:
        self.snapshots.inc()
        self.snapshot_seconds.observe(seconds)

    def snapshot_failed(self) -> None:
        self.snapshot_failures.inc()

    def restored(self, seconds: float) -> None:
        self.restores.inc()
        self.restore_seconds.observe(seconds)

    def restore_failed(self) -> None:
        self.restore_failures.inc()

    def restore_dropped(self) -> None:
        self.restores_dropped.inc()

    def offset_jump(self) -> None:
        self.offset_jumps.inc()

    def caught_up(self, seconds: float) -> None:
        self.catch_up_seconds.observe(seconds)

    def add_collector(self, collector: Collector) -> None:
        self.registry.register(collector)


def family_names(families: Iterable[Metric]) -> set[str]:
    """The names a scrape shows for these families (counters with their `_total`)."""
    return {f"{f.name}_total" if f.type == "counter" else f.name for f in families}
