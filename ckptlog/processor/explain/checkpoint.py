"""One checkpoint's story and its state now (`ckptlog explain`, `AsyncReader.explain`), contract §10.

Pure: a run's steps (ckptlog/processor/explain/story.py) and its state after them in, a JSON-ready
document and one paragraph out. A path is matched by its canonical key, so any spelling of it
the fold accepts finds it; a path reported, evicted and reported again is explained from its
latest report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ckptlog.events.numbers import number_text
from ckptlog.events.paths import UnsafePath, key_of, parse_url
from ckptlog.processor.core.state import CheckpointRecord, RunState
from ckptlog.processor.explain.story import DELETION_REFUSED, Step

STATES = ("kept", "latest", "pending", "preserved", "evicted", "deleted", DELETION_REFUSED, "unknown")
_AFTER_EVICTION = {"deleted": "deleted", DELETION_REFUSED: DELETION_REFUSED}


def path_key(path: str) -> str:
    """The canonical key the fold knows a path by; the text itself when it is not a safe URL."""
    try:
        return key_of(parse_url(path))
    except UnsafePath:
        return path


def _kept_because(run: RunState, record: CheckpointRecord) -> dict[str, Any]:
    """Why a kept checkpoint stays: its rank among those `num_to_keep` counts (None when preserved)
    and the exemptions that hold for it."""
    counted = [r for r in run.checkpoints if r.preserved is None]  # worst first
    rank = None if record.preserved is not None else len(counted) - counted.index(record)
    keep = run.keep
    return {
        "rank": rank,
        "num_to_keep": keep,
        "within_num_to_keep": rank is not None and (keep is None or rank <= keep),
        "latest": run.latest is record,
        "pending": record.key in run.pending,
        "preserved": record.preserved,
    }


def _state_of_kept(because: dict[str, Any]) -> str:
    if because["within_num_to_keep"]:
        return "kept"
    for state in ("preserved", "latest", "pending"):
        if because[state]:
            return state
    return "kept"  # between reports of a run that keeps more than num_to_keep (a finished run's 'kept')


def explain(run_id: str, path: str, steps: Sequence[Step], run: RunState | None) -> dict[str, Any]:
    """The document: `state`, `reported`, `evicted`, `kept_because`, and the steps naming the path."""
    key = path_key(path)
    mine = [
        (step, e) for step in steps for e in step.effects if e.get("path") is not None and path_key(e["path"]) == key
    ]
    doc: dict[str, Any] = {"run_id": run_id, "path": path, "state": "unknown", "reported": None, "evicted": None}
    doc["kept_because"] = None
    doc["history"] = [{"offset": s.offset, "id": s.id, "type": s.type, "time": s.time, **e} for s, e in mine]
    last = max((i for i, (_, e) in enumerate(mine) if e["kind"] == "registered"), default=None)
    if last is None:  # reported before the replay's start (a snapshot, retention deleted the log below it)?
        tail = _before_start(doc, key, mine, run)
        if tail is None:
            return doc
    else:
        step, effect = mine[last]
        doc["reported"] = {"id": step.id, "offset": step.offset, "report_index": effect["report_index"]}
        doc["state"] = "kept"
        tail = mine[last + 1 :]
    for step, effect in tail:
        if effect["kind"] == "evicted":
            doc["evicted"] = {"id": step.id, "offset": step.offset, "reason": effect["reason"]}
            doc["state"] = "evicted"
        elif effect["kind"] in _AFTER_EVICTION and doc["evicted"] is not None:
            doc["state"] = _AFTER_EVICTION[effect["kind"]]
    record = run.by_key.get(key) if run is not None else None
    if doc["evicted"] is None and record is not None and run is not None:
        doc["kept_because"] = _kept_because(run, record)
        doc["state"] = _state_of_kept(doc["kept_because"])
    elif doc["evicted"] is None:  # registered, never evicted, not kept: the run was forgotten
        doc["state"] = "unknown"
    return doc


_UNKNOWN_EVENT = {"id": None, "offset": None}


def _before_start(
    doc: dict[str, Any], key: str, mine: list[tuple[Step, dict[str, Any]]], run: RunState | None
) -> list[tuple[Step, dict[str, Any]]] | None:
    """A path the replayed steps never register but the state it started from (a snapshot) knows:
    kept, or evicted with its deletion owed or settled after the start. Sets `reported` (and
    `evicted`) with no event (those records are gone); the steps to apply after. None: unknown."""
    record = run.by_key.get(key) if run is not None else None
    settled = any(e["kind"] in _AFTER_EVICTION for _, e in mine)
    owed = run is not None and key in run.outstanding
    if record is None and not owed and not settled:
        return None
    doc["reported"] = {**_UNKNOWN_EVENT, "report_index": record.report_index if record is not None else None}
    doc["state"] = "kept"
    if record is None:
        doc["evicted"] = {**_UNKNOWN_EVENT, "reason": None}
        doc["state"] = "evicted"
    return mine


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _reason_text(reason: dict[str, Any]) -> str:
    order = "by score" if reason["order"] == "score" else "by report order (no score attribute)"
    if reason["rule"] == "best":
        text = f"the run finished keeping only its best, and it ranked {_ordinal(reason['rank'])} {order}"
    else:
        text = f"it ranked {_ordinal(reason['rank'])} {order} with num_to_keep={reason['num_to_keep']}"
    if reason.get("score") is not None:
        text += f" (score {number_text(reason['score'])}"
        worst = reason.get("worst_kept_score")
        text += f"; the worst kept scored {number_text(worst)})" if worst is not None else ")"
    return text + "; it was not the latest, not pending and not preserved"


def paragraph(doc: dict[str, Any]) -> str:
    """The document as one paragraph a person reads in five seconds."""
    head = f"run {doc['run_id']!r}, checkpoint {doc['path']!r}: {doc['state'].upper().replace('_', ' ')}."
    reported = doc["reported"]
    if reported is None:
        refused = [h for h in doc["history"] if h["kind"] == "rejected"]
        if refused:
            last = refused[-1]
            return (
                f"{head} The processor rejected the run's report of it ({len(refused)} time(s); the last by event "
                f"{last['id']!r} at offset {last['offset']}, {last['reason']}: {last['message']})."
            )
        return (
            head + " The run never reported it (check the run id and the path; `ckptlog history RUN` lists its events)."
        )
    if reported["offset"] is None:
        index = "" if reported["report_index"] is None else f" as report {reported['report_index']}"
        text = f"{head} Reported{index} before the replay's start (retention deleted those events; the snapshot"
        text += " the replay starts from holds it)."
    else:
        event = f"event {reported['id']!r} (offset {reported['offset']})"
        text = f"{head} Reported as report {reported['report_index']} by {event}."
    evicted = doc["evicted"]
    if evicted is not None and evicted["offset"] is None:
        text += " Evicted before the replay's start (why was in the deleted events)."
    elif evicted is not None:
        text += f" Evicted by event {evicted['id']!r} (offset {evicted['offset']}): {_reason_text(evicted['reason'])}."
    if evicted is not None:
        text += {
            "deleted": " Its deletion is confirmed.",
            "evicted": " Its deletion is owed: the processor deletes it once the eviction is durable.",
            DELETION_REFUSED: " The deleter refused to delete it (see `ckptlog history`); it is still on storage.",
        }.get(doc["state"], "")
        return text
    because = doc["kept_because"]
    if because is None:
        return text + " The run's state is gone (forgotten), so whether it is kept is not known."
    reasons = []
    if because["within_num_to_keep"]:
        limit = "no num_to_keep" if because["num_to_keep"] is None else f"num_to_keep={because['num_to_keep']}"
        reasons.append(f"it ranks {_ordinal(because['rank'])} with {limit}")
    if because["preserved"]:
        reasons.append(f"the {because['preserved']} rule preserved it for good")
    if because["latest"]:
        reasons.append("it is the latest checkpoint")
    if because["pending"]:
        reasons.append("its validation is pending")
    return text + " Kept because " + (" and ".join(reasons) or "the run keeps it") + "."
