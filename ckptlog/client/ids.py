"""Deterministic event ids: the same logical event always gets the same id, so a retry is a no-op.

The processor drops an event whose id it already applied to that run (contract §2, §3
*Deduplication*), so the id must name *what happened*, never *when it was sent*. Events that
come in a sequence get a *structured* id (ckptlog/events/event_ids.py: `ck1:{producer}:{sequence}:{run}`),
which the processor remembers as ranges of sequence numbers, a few bytes per producer however many
there are; the others a UUIDv5 in `NAMESPACE` of a newline-joined name (run ids hold no control
characters, so the join is unambiguous), remembered one by one in a bounded window.

Each UUIDv5 is `event_id(run, kind, *parts)`. The ids below have a function of their own, since more
than the reporter's method makes them (the CLI, the trainer integrations, the evaluator, the
tests); an event only its reporter method sends names its id there, `ids.event_id(self.run_id,
"run_paused", epoch)`, and says what the parts are in its docstring (ckptlog/client/senders.py):

| event | id |
|---|---|
| report | `ck1:r:<generation or 0>:<index within that generation>:run` |
| report, a trainer integration (integrations/session.py) | `ck1:a:<the job's attempt id>:<generation>:<index>:run` |
| report, `ckptlog adopt-ray` | `ck1:ad:<Ray's report index>:run` |
| worker_group_restart | `ck1:g:<the generation it creates>:run` |
| validation_result (Evaluator) | `ck1:v:<topic>:<partition>:<sequence>:<offset>:run` of the request it answers |
| run_started | UUIDv5 of `run\\nrun_started\\n<sha256 of the canonical data, 16 hex>` |
| report, CLI without --index | UUIDv5 of `run\\nreport-content\\n<sha256 of the canonical data, 16 hex>` |
| run_finished | UUIDv5 of `run\\nrun_finished`; after the n-th reopen of `run\\nrun_finished\\n<n>` (once per epoch) |
| run_reopened | UUIDv5 of `run\\nrun_reopened\\n<n>`: the n-th reopen (the VIEW's `reopened` + 1) |
| run_forgotten | UUIDv5 of `run\\nrun_forgotten` |
| validation_result, forwarded | UUIDv5 of `run\\nforwarded_result\\n<sha256 of the canonical data, 16 hex>` |

A value the structured grammar does not spell (a negative index, an attempt id with other
characters, a request id the processor did not make) gets the UUIDv5 of the name earlier clients
used for it (`run\\nreport\\n<generation>\\n<index>`, …): still deterministic, remembered one by
one. Clients of ckptlog 0.3 sent those for every event, so an event one of them sent, resent by a
newer client, has a new id and is not a repeat: upgrade a run's producers between runs, not while
one may resend.

run_started hashes its body: an identical repeat is deduplicated, a different body gets a
new id and is rejected by the processor as a conflict (instead of being silently dropped).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from ckptlog.events.envelope import parse_output_id
from ckptlog.events.event_ids import structured_id

NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/ckptlog/ckptlog/events")


def event_id(run_id: str, kind: str, *parts: object) -> str:
    """The id of `kind`'s event of run `run_id` named by `parts` (see the module docstring)."""
    return str(uuid.uuid5(NAMESPACE, "\n".join(str(p) for p in (run_id, kind, *parts))))


def _digest(data: dict[str, Any]) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def run_started_id(run_id: str, data: dict[str, Any]) -> str:
    return event_id(run_id, "run_started", _digest(data))


def _structured(run_id: str, kind: str, fields: tuple[str | int, ...], sequence: int, name: str, *parts: object) -> str:
    """The structured id, or the UUIDv5 of `name` and `parts` for values the grammar does not spell."""
    try:
        return structured_id(run_id, kind, fields, sequence)
    except ValueError:
        return event_id(run_id, name, *parts)


def report_id(run_id: str, generation: int | None, index: int) -> str:
    return _structured(run_id, "r", (generation or 0,), index, "report", generation or 0, index)


def attempt_report_id(run_id: str, attempt: str, generation: int, index: int) -> str:
    """A report of one Ray controller (`attempt`: a fresh id per controller start): a retry within the
    attempt repeats the id, a resumed job under the same run name never reuses one (issue 21)."""
    return _structured(run_id, "a", (attempt, generation), index, "report", attempt, generation, index)


def adopted_report_id(run_id: str, ray_index: int) -> str:
    """A checkpoint of an existing Ray run, named by Ray's report index: adopting twice is one event each."""
    return _structured(run_id, "ad", (), ray_index, "adopted_report", ray_index)


def report_content_id(run_id: str, data: dict[str, Any]) -> str:
    """For one-shot senders (the CLI) with no sequence: a re-run of the same command is
    deduplicated; two *identical* metric-only reports would be too, so scripts pass --index."""
    return event_id(run_id, "report-content", _digest(data))


def restart_id(run_id: str, new_generation: int) -> str:
    return _structured(run_id, "g", (), new_generation, "worker_group_restart", new_generation)


def forwarded_result_id(run_id: str, data: dict[str, Any]) -> str:
    """A result obtained outside ckptlog (Ray's own validation): the same result sent twice is one."""
    return event_id(run_id, "forwarded_result", _digest(data))


def validation_result_id(run_id: str, request_id: str) -> str:
    """One result per validation request (named by where the processor wrote it): a redo after an
    evaluator crash is deduplicated."""
    request = parse_output_id(request_id)
    if request is None:
        return event_id(run_id, "validation_result", request_id)
    topic, partition, offset, sequence = request
    return _structured(run_id, "v", (topic, partition, sequence), offset, "validation_result", request_id)


def finished_id(run_id: str, epoch: int = 0) -> str:
    """A run finishes once per epoch: every finish of it is the same event (the first one's `keep`
    decides) until it is reopened; `epoch` is the number of reopens before it (the VIEW's `reopened`),
    0 giving the id every finish had before reopens (contract §3 "Reopened runs")."""
    return event_id(run_id, "run_finished") if epoch == 0 else event_id(run_id, "run_finished", epoch)


def reopened_id(run_id: str, epoch: int) -> str:
    """The reopen that starts `epoch` (>= 1: the VIEW's `reopened` + 1): a retry is the same event."""
    return event_id(run_id, "run_reopened", epoch)
