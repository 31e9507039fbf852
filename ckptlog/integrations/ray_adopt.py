"""Put an existing Ray Train run under ckptlog's retention (`ckptlog adopt-ray EXPERIMENT_DIR`).

Ray Train (v2) keeps its checkpoint manager's state in `{experiment}/checkpoint_manager_snapshot.json`:
the checkpoints it still has (by directory name, with their metrics and report index), the
latest, the pending validations. `plan` reads that file and the tree beside it, and says what to
send: one `run_started` (the experiment directory is the run's root) and one `report` per
checkpoint, in Ray's report order. It reads Ray's JSON, never imports Ray.

What is refused, per checkpoint (listed in `Adoption.skipped` with the reason, never reported, so
ckptlog never ranks, and so never deletes, it): a name that is not one plain path segment (`..`,
`/abs`, `a/b`, empty, control characters), a directory that is missing, a symlink (its target may
lie anywhere), or anything that is not a directory. The experiment directory itself must be a real
directory, not a symlink. Report ids come from Ray's report index (`ckptlog.client.ids.adopted_report_id`),
so adopting twice sends the same events and the processor counts them once.

Not carried over: Ray's pending validations (ckptlog sees those checkpoints unvalidated; its
evaluator validates only what ckptlog's own reports ask for) and the report indices of reports
without a checkpoint (ckptlog numbers the adopted reports 0, 1, 2, ...).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckptlog.client.errors import ClientError

SNAPSHOT = "checkpoint_manager_snapshot.json"


class NotAdoptable(ClientError):
    """The directory is not a Ray Train experiment ckptlog can adopt (the message says why and what to do)."""


@dataclass(frozen=True)
class AdoptedReport:
    ray_index: int  # Ray's report index: the event id's name
    path: str
    metrics: dict[str, Any]


@dataclass
class Adoption:
    root: str
    reports: list[AdoptedReport] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (Ray's directory name, why)
    latest: str | None = None
    pending: list[str] = field(default_factory=list)  # Ray's pending validations, not carried over


def _experiment(directory: Path) -> Path:
    if directory.is_symlink():
        raise NotAdoptable(
            f"{directory} is a symlink: adopt the experiment directory itself (its real path), so ckptlog's "
            "run root is where the checkpoints are"
        )
    if not directory.is_dir():
        raise NotAdoptable(f"{directory} is not a directory: give the Ray experiment directory (storage_path/name)")
    return Path(os.path.abspath(directory))


def _snapshot(experiment: Path) -> dict[str, Any]:
    file = experiment / SNAPSHOT
    if file.is_symlink() or not file.is_file():
        raise NotAdoptable(
            f"{experiment} has no {SNAPSHOT}: it is not a Ray Train (v2) experiment directory, or its run never "
            "reported a checkpoint"
        )
    try:
        state = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotAdoptable(f"{file} cannot be read as Ray's snapshot ({exc}); nothing was sent") from exc
    results, indices = state.get("checkpoint_results"), state.get("checkpoint_report_indices")
    if not isinstance(results, list) or not isinstance(indices, list) or len(results) != len(indices):
        raise NotAdoptable(
            f"{file} does not have the layout of the Ray versions ckptlog knows (checkpoint_results and "
            "checkpoint_report_indices of one length); nothing was sent"
        )
    _check_fields(file, results, state.get("pending_training_results"))
    return dict(state)


def _check_fields(file: Path, results: list[Any], pending: object) -> None:
    """Ray's `metrics` of each checkpoint is an object (or absent) and its pending validations a
    list (or absent); anything else refuses the whole adoption, naming the field, before it sends."""
    for position, result in enumerate(results):
        metrics = result.get("metrics") if isinstance(result, dict) else None
        if metrics is not None and not isinstance(metrics, dict):
            name = result.get("checkpoint_dir_name")
            raise NotAdoptable(
                f"{file}: checkpoint_results[{position}].metrics (checkpoint {name!r}) is {_shown(metrics)}, not an "
                "object of metrics as Ray writes it; nothing was sent: fix or remove that entry, then adopt again"
            )
    if pending is not None and not isinstance(pending, list):
        raise NotAdoptable(
            f"{file}: pending_training_results is {_shown(pending)}, not a list as Ray writes it; nothing was sent: "
            "fix it (an empty list: none pending), then adopt again"
        )


def _shown(value: object) -> str:
    text = json.dumps(value, allow_nan=True)
    return f"the {type(value).__name__} {text if len(text) <= 40 else text[:39] + '…'}"


def refusal(experiment: Path, name: object) -> str | None:
    """Why Ray's checkpoint directory `name` cannot be adopted, or None."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name:
        return "not one plain directory name inside the experiment directory"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "a control character in the name"
    path = experiment / name
    if path.is_symlink():
        return "a symlink (its target may lie outside the experiment directory)"
    if not path.exists():
        return "missing on disk (deleted already?)"
    if not path.is_dir():
        return "not a directory"
    return None


def plan(directory: Path) -> Adoption:
    """What adopting the Ray experiment in `directory` sends (see the module docstring)."""
    experiment = _experiment(directory)
    state = _snapshot(experiment)
    adoption = Adoption(root=str(experiment))
    pairs = sorted(zip(state["checkpoint_report_indices"], state["checkpoint_results"], strict=True), key=_order)
    for index, result in pairs:
        name = result.get("checkpoint_dir_name") if isinstance(result, dict) else None
        why = refusal(experiment, name) if isinstance(index, int) else "no report index"
        if why is not None:
            adoption.skipped.append((str(name), why))
            continue
        adoption.reports.append(AdoptedReport(index, str(experiment / str(name)), dict(result.get("metrics") or {})))
    latest = state.get("latest_checkpoint_result")
    if isinstance(latest, dict) and isinstance(latest.get("checkpoint_dir_name"), str):
        adoption.latest = str(experiment / latest["checkpoint_dir_name"])
    pending = state.get("pending_training_results")
    adoption.pending = [str(p.get("checkpoint_dir_name")) for p in pending or [] if isinstance(p, dict)]  # a list
    return adoption


def _order(pair: tuple[Any, Any]) -> tuple[int, int]:
    index = pair[0]
    return (0, index) if isinstance(index, int) else (1, 0)
