"""Deterministic event ids: the same logical event always gets the same id, so a retry is a no-op.

The processor drops an event whose id it already applied to that run (contract §2), so the id
must name *what happened*, never *when it was sent*. Each id is `event_id(run, kind, *parts)`: a
UUIDv5 in `NAMESPACE` of the newline-joined name `run\nkind\nparts…` (run ids hold no control
characters, so the join is unambiguous). The ids below have a function of their own, since more
than the reporter's method makes them (the CLI, the trainer integrations, the evaluator, the
tests); an event only its reporter method sends names its id there, `ids.event_id(self.run_id,
"run_paused", epoch)`, and says what the parts are in its docstring (ckptlog/client/senders.py):

| event | name |
|---|---|
| run_started | `run\\nrun_started\\n<sha256 of the canonical data, 16 hex>` |
| report | `run\\nreport\\n<generation or 0>\\n<index within that generation>` |
| report, CLI without --index | `run\\nreport-content\\n<sha256 of the canonical data, 16 hex>` |
| report, `ckptlog adopt-ray` | `run\\nadopted_report\\n<Ray's report index>` |
| report, Ray callback | `run\\nreport\\n<the controller's attempt id>\\n<generation>\\n<index>` |
| worker_group_restart | `run\\nworker_group_restart\\n<the generation it creates>` |
| validation_result | `run\\nvalidation_result\\n<id of the validation_requested event>` |
| run_finished | `run\\nrun_finished`; after the n-th reopen `run\\nrun_finished\\n<n>` (once per epoch) |
| run_reopened | `run\\nrun_reopened\\n<n>`: the n-th reopen (the VIEW's `reopened` + 1) |
| validation_result, forwarded | `run\\nforwarded_result\\n<sha256 of the canonical data, 16 hex>` |

run_started hashes its body: an identical repeat is deduplicated, a different body gets a
new id and is rejected by the processor as a conflict (instead of being silently dropped).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/ckptlog/ckptlog/events")


def event_id(run_id: str, kind: str, *parts: object) -> str:
    """The id of `kind`'s event of run `run_id` named by `parts` (see the module docstring)."""
    return str(uuid.uuid5(NAMESPACE, "\n".join(str(p) for p in (run_id, kind, *parts))))


def _digest(data: dict[str, Any]) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def run_started_id(run_id: str, data: dict[str, Any]) -> str:
    return event_id(run_id, "run_started", _digest(data))


def report_id(run_id: str, generation: int | None, index: int) -> str:
    return event_id(run_id, "report", generation or 0, index)


def attempt_report_id(run_id: str, attempt: str, generation: int, index: int) -> str:
    """A report of one Ray controller (`attempt`: a fresh id per controller start): a retry within the
    attempt repeats the id, a resumed job under the same run name never reuses one (issue 21)."""
    return event_id(run_id, "report", attempt, generation, index)


def adopted_report_id(run_id: str, ray_index: int) -> str:
    """A checkpoint of an existing Ray run, named by Ray's report index: adopting twice is one event each."""
    return event_id(run_id, "adopted_report", ray_index)


def report_content_id(run_id: str, data: dict[str, Any]) -> str:
    """For one-shot senders (the CLI) with no sequence: a re-run of the same command is
    deduplicated; two *identical* metric-only reports would be too, so scripts pass --index."""
    return event_id(run_id, "report-content", _digest(data))


def restart_id(run_id: str, new_generation: int) -> str:
    return event_id(run_id, "worker_group_restart", new_generation)


def forwarded_result_id(run_id: str, data: dict[str, Any]) -> str:
    """A result obtained outside ckptlog (Ray's own validation): the same result sent twice is one."""
    return event_id(run_id, "forwarded_result", _digest(data))


def validation_result_id(run_id: str, request_id: str) -> str:
    """One result per validation request: a redo after an evaluator crash is deduplicated."""
    return event_id(run_id, "validation_result", request_id)


def finished_id(run_id: str, epoch: int = 0) -> str:
    """A run finishes once per epoch: every finish of it is the same event (the first one's `keep`
    decides) until it is reopened; `epoch` is the number of reopens before it (the VIEW's `reopened`),
    0 giving the id every finish had before reopens (contract §3 "Reopened runs")."""
    return event_id(run_id, "run_finished") if epoch == 0 else event_id(run_id, "run_finished", epoch)


def reopened_id(run_id: str, epoch: int) -> str:
    """The reopen that starts `epoch` (>= 1: the VIEW's `reopened` + 1): a retry is the same event."""
    return event_id(run_id, "run_reopened", epoch)
