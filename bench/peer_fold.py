"""The peer's job, written as a Quix Streams user would write it: per run, a top-K kept set.

bench/quix_peer.py runs this inside a Quix Streams `Application` (one stateful `apply` per
message, the state a JSON-serialisable dict in its RocksDB store under the run's key); it lives
here, without any Quix import, so a unit test can hold its kept sets to ckptlog's fold
(tests/unit/bench/test_peer_fold.py) without a broker or Quix installed.

What it does, per input event of the benchmark workloads (bench.workload, bench.processor's
sparse one): `run_started` sets the run's retention (num_to_keep, score attribute and order);
a report counts, and its checkpoint becomes the latest and enters the kept list in sort order,
pending when validation was asked for; a validation result of a pending checkpoint merges its
metrics (VALIDATED) and re-sorts it; after a registration or a result, retention evicts
`kept[:-num_to_keep]` except the latest and pending ones (contract §3, Ray's rule). Out: one
`checkpoint_evicted` per eviction and one `watermark` per event (committed, validated, generation,
index in generation; contract §4's values) — a message-at-a-time engine has no batch to
coalesce watermarks over, so it writes the one every event makes.

What it leaves out, which ckptlog does (so the comparison flatters the peer): event-id
deduplication, validation of the envelope and of paths (confinement, nesting), preserved
checkpoints and the retention rules beyond Ray, restarts, finished and forgotten runs,
`checkpoint_registered`/`validation_requested`/status outputs, VIEWs, dead letters, deletions.
An event of another type changes nothing and writes nothing.
"""

from __future__ import annotations

import bisect
import math
from typing import Any

from ckptlog.events.metrics import MISSING, lookup

Run = dict[str, Any]
"""A run's state: JSON-serialisable, as a Quix state store keeps it (serialised on every set).

`kept`: [has_score (0/1), signed score (0.0 without one), report index, path], ascending, best
last — ckptlog's sort key (contract §3) with 0.0 standing in for its -inf when there is no
score (has_score 0 already ranks it below every scored one). `pending`: path -> the checkpoint's
metrics (only a pending checkpoint's metrics can change, so only theirs are kept)."""

EVICTED, WATERMARK = "ckptlog.checkpoint_evicted.v2", "ckptlog.watermark.v1"


def new_run(data: dict[str, Any] | None = None) -> Run:
    """A run from its run_started `data`, or with no retention (keep all, report order)."""
    config = (data or {}).get("checkpoint_config") or {}
    return {
        "keep": config.get("num_to_keep"),
        "attr": config.get("checkpoint_score_attribute"),
        "max": config.get("checkpoint_score_order", "max") == "max",
        "kept": [],
        "latest": None,
        "pending": {},
        "reports": 0,
        "generation": 0,
        "in_generation": 0,
    }


def sort_key(run: Run, metrics: dict[str, Any], index: int) -> list[Any]:
    """[has_score, signed score, report index]: a real number (not bool, not NaN) scores."""
    attr = run["attr"]
    value = MISSING if attr is None else lookup(metrics, attr)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return [0, 0.0, index]
    if math.isinf(value):  # JSON state cannot hold it; the workloads never report one
        raise ValueError(f"the peer's fold does not rank infinite scores ({value} at report {index})")
    return [1, value if run["max"] else -value, index]


def apply(run: Run | None, event: dict[str, Any], origin: str) -> tuple[Run | None, list[dict[str, Any]]]:
    """The run's state after `event`, and the outputs (ids `peer:{origin}:{sequence}`)."""
    kind, data = event["type"], event["data"]
    if kind == "ckptlog.run_started.v1":
        if run is not None:
            return run, []  # a repeat or a late one: the first decides
        run = new_run(data)
        return run, [_output(event, origin, 0, WATERMARK, watermark(run))]
    if kind == "ckptlog.report.v1":
        run = run if run is not None else new_run()
        return run, _report(run, event, origin)
    if kind == "ckptlog.validation_result.v1" and run is not None:
        return run, _result(run, event, origin)
    return run, []


def _report(run: Run, event: dict[str, Any], origin: str) -> list[dict[str, Any]]:
    data = event["data"]
    index = run["reports"]
    run["reports"] += 1
    run["in_generation"] += 1
    checkpoint = data.get("checkpoint")
    evicted: list[dict[str, Any]] = []
    if checkpoint:
        path, metrics = checkpoint["path"], data.get("metrics", {})
        run["latest"] = path
        bisect.insort(run["kept"], [*sort_key(run, metrics, index), path])
        if data.get("validation"):
            run["pending"][path] = metrics
        evicted = retention(run)
    return _outputs(run, event, origin, evicted)


def _result(run: Run, event: dict[str, Any], origin: str) -> list[dict[str, Any]]:
    data = event["data"]
    path = data["checkpoint_path"]
    metrics = run["pending"].pop(path, None)
    if metrics is None:
        return [_output(event, origin, 0, WATERMARK, watermark(run))]  # not pending: nothing changes
    if data["status"] == "VALIDATED":
        kept = run["kept"]
        at = next(i for i, entry in enumerate(kept) if entry[3] == path)
        index = kept.pop(at)[2]
        bisect.insort(kept, [*sort_key(run, {**metrics, **data.get("metrics", {})}, index), path])
    return _outputs(run, event, origin, retention(run))


def retention(run: Run) -> list[dict[str, Any]]:
    """Evict `kept[:-num_to_keep]` except the latest and the pending: the evicted as outputs' data."""
    keep, kept = run["keep"], run["kept"]
    if keep is None or len(kept) <= keep:
        return []
    latest, pending = run["latest"], run["pending"]
    out, stay = [], []
    for entry in kept[:-keep]:
        if entry[3] == latest or entry[3] in pending:
            stay.append(entry)
        else:
            out.append({"checkpoint_path": entry[3], "report_index": entry[2], "num_to_keep": keep})
    run["kept"] = stay + kept[-keep:]
    return out


def watermark(run: Run) -> dict[str, int]:
    pending = run["pending"]
    validated = run["reports"]
    if pending:
        validated = min(entry[2] for entry in run["kept"] if entry[3] in pending)
    return {
        "committed": run["reports"],
        "validated": validated,
        "generation": run["generation"],
        "index_in_generation": run["in_generation"],
    }


def kept_paths(run: Run) -> list[str]:
    """The kept checkpoints' paths in sort order, best last (as a VIEW's `checkpoints`)."""
    return [entry[3] for entry in run["kept"]]


def _outputs(run: Run, event: dict[str, Any], origin: str, evicted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [_output(event, origin, n, EVICTED, data) for n, data in enumerate(evicted)]
    out.append(_output(event, origin, len(out), WATERMARK, watermark(run)))
    return out


def _output(event: dict[str, Any], origin: str, sequence: int, kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"peer:{origin}:{sequence}",
        "source": "bench/quix_peer",
        "type": kind,
        "subject": event["subject"],
        "datacontenttype": "application/json",
        "data": data,
    }
