"""A naive reading of the contract's fold, the yardstick of `python -m bench.fold --only naive`.

`python -m bench.naive FILE` reads the CloudEvents JSON lines of bench/workload.py's logs
(run_started, report, validation_result) the way a first implementation would: `json.loads`
per line, one dict per run, the kept checkpoints in a plain list that is sorted in full after
every change, retention as a full pass over it (contract §3: by `(has_score, signed score,
report_index)`, best last; the latest and pending ones are never evicted), a set of event ids for
duplicates. It prints what `ckptlog fold` prints of each run: the kept checkpoints (path, metrics,
status, report index), the latest and every evicted path in eviction order, as one JSON document.

It checks nothing the workload does not need (no envelope validation, no path safety, no
dedup window bound, no generations, no outputs), so it is a lower bound of what a faithful naive
fold costs, not a second implementation: nothing imports it but bench.fold.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

Run = dict[str, Any]


def _score(run: Run, checkpoint: dict[str, Any]) -> tuple[bool, float, int]:
    value: Any = checkpoint["metrics"]
    for part in run["attr"].split("/") if run["attr"] else ():
        value = value.get(part) if isinstance(value, dict) else None
    usable = isinstance(value, int | float) and not isinstance(value, bool) and value == value
    signed = (value if run["order"] == "max" else -value) if usable else -math.inf
    return usable, signed, checkpoint["index"]


def _apply(runs: dict[str, Run], event: dict[str, Any]) -> None:
    run = runs.setdefault(
        event["subject"],
        {"keep": None, "attr": None, "order": "max", "kept": [], "latest": None, "pending": [], "count": 0},
    )
    run.setdefault("seen", set())
    if event["id"] in run["seen"]:
        return
    run["seen"].add(event["id"])
    kind, data = event["type"].split(".")[1], event["data"]
    if kind == "run_started":
        config = data.get("checkpoint_config", {})
        run.update(keep=config.get("num_to_keep"), attr=config.get("checkpoint_score_attribute"))
        run.update(order=config.get("checkpoint_score_order", "max"), root=data["storage_path"], evicted=[])
        return
    if kind == "report":
        index, run["count"] = run["count"], run["count"] + 1
        if data.get("checkpoint") is None:
            return
        checkpoint = {"path": data["checkpoint"]["path"], "metrics": data["metrics"], "index": index}
        checkpoint["status"] = "PENDING_VALIDATION" if data.get("validation") else "COMMITTED"
        run["kept"].append(checkpoint)
        run["latest"] = checkpoint
        if data.get("validation"):
            run["pending"].append(checkpoint)
    elif kind == "validation_result":
        hits = [c for c in run["pending"] if c["path"] == data["checkpoint_path"]]
        if not hits:
            return
        run["pending"].remove(hits[0])
        hits[0]["status"] = data["status"]
        if data["status"] == "VALIDATED":
            hits[0]["metrics"] = {**hits[0]["metrics"], **data.get("metrics", {})}
    _retain(run)


def _retain(run: Run) -> None:
    run["kept"].sort(key=lambda c: _score(run, c))
    if run["keep"] is None:
        return
    doomed = [c for c in run["kept"][: -run["keep"]] if c is not run["latest"] and c not in run["pending"]]
    run["kept"] = [c for c in run["kept"] if c not in doomed]
    run.setdefault("evicted", []).extend(c["path"] for c in doomed)


def main() -> None:
    runs: dict[str, Run] = {}
    with open(sys.argv[1], "rb") as stream:
        for line in stream:
            _apply(runs, json.loads(line))
    views = {
        run_id: {
            "checkpoints": [
                {"path": c["path"], "metrics": c["metrics"], "status": c["status"], "report_index": c["index"]}
                for c in run["kept"]
            ],
            "latest": run["latest"] and run["latest"]["path"],
            "evicted": run.get("evicted", []),
        }
        for run_id, run in runs.items()
    }
    json.dump({"runs": views}, sys.stdout)


if __name__ == "__main__":
    main()
