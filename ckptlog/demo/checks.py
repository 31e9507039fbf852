"""The demo's proof: the service's views equal an offline fold of the log, and the disk agrees.

1. Every run's VIEW on the state topic equals `ckptlog.processor.foldfile.fold_lines` over the input
   log read back from Kafka (compared as canonical JSON, so NaN metrics compare equal).
2. Every evicted checkpoint directory is gone from disk (deletions are asynchronous: polled
   for a while), and every kept, latest or pending one is still there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckptlog.client.views import RunView
from ckptlog.demo.validation import local_path
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.foldfile import FoldResult, fold_lines


@dataclass(slots=True)
class CheckReport:
    problems: list[str] = field(default_factory=list)
    evicted: int = 0
    deleted: int = 0
    kept_on_disk: int = 0
    rejected: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def canonical(view: Mapping[str, Any]) -> str:
    return json.dumps(RunView.model_validate(view).model_dump(mode="json"), sort_keys=True, allow_nan=True)


def fold_log(values: Iterable[bytes], settings: FoldSettings) -> FoldResult:
    return fold_lines((v.replace(b"\n", b" ") for v in values), settings)


def compare_views(actual: Mapping[str, RunView], expected: FoldResult, report: CheckReport) -> None:
    document = expected.document()
    report.rejected = len(document["rejected"])
    for problem in document["rejected"][:3]:
        report.problems.append(f"the offline fold rejected input line {problem['line']}: {problem['message']}")
    runs: dict[str, Any] = document["runs"]
    for run_id in sorted(set(runs) | set(actual)):
        if run_id not in actual:
            report.problems.append(f"run {run_id}: no view on the state topic, but the log folds to one")
        elif run_id not in runs:
            report.problems.append(f"run {run_id}: a view on the state topic, but no such run in the log")
        elif canonical(actual[run_id].model_dump()) != canonical(runs[run_id]):
            report.problems.append(
                f"run {run_id}: the state topic's view differs from the offline fold of the "
                f"log:\n  service: {canonical(actual[run_id].model_dump())}\n  fold:    "
                f"{canonical(runs[run_id])}"
            )


def live_paths(view: RunView) -> set[str]:
    """Kept, latest and pending checkpoints: none of them may ever be deleted."""
    paths = {c.path for c in view.checkpoints}
    return paths | ({view.latest} if view.latest else set())


async def check_disk(
    views: Mapping[str, RunView], evicted: Mapping[str, list[str]], report: CheckReport, timeout_s: float = 20.0
) -> None:
    gone = [p for paths in evicted.values() for p in paths]
    report.evicted = len(gone)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while any(local_path(p).exists() for p in gone) and loop.time() < deadline:  # noqa: ASYNC110 - polls a disk
        await asyncio.sleep(0.1)
    remaining = [p for p in gone if local_path(p).exists()]
    report.deleted = len(gone) - len(remaining)
    for path in remaining[:5]:
        report.problems.append(f"evicted checkpoint {path} is still on disk {timeout_s:.0f}s after the run ended")
    keep = sorted(p for view in views.values() for p in live_paths(view))
    missing = [p for p in keep if not local_path(p).is_dir()]
    report.kept_on_disk = len(keep) - len(missing)
    for path in missing[:5]:
        report.problems.append(f"kept/latest/pending checkpoint {path} is missing from disk")
    extra = {p for p in gone if p in keep}
    for path in sorted(extra)[:5]:
        report.problems.append(f"{path} is both evicted and kept")


def tree_size(root: Path) -> int:
    return sum(1 for _ in root.rglob("model.json")) if root.exists() else 0
