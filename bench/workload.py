"""Synthetic event logs for the benchmarks: deterministic, written as CloudEvents JSON lines."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Literal


def _event(eid: str, kind: str, run_id: str, data: dict[str, object]) -> bytes:
    envelope = {
        "specversion": "1.0",
        "id": eid,
        "source": "bench",
        "type": f"ckptlog.{kind}.v1",
        "subject": run_id,
        "data": data,
    }
    return json.dumps(envelope, separators=(",", ":")).encode() + b"\n"


ROOT = "file:///bench/runs"


IdKind = Literal["foreign", "structured"]


def events(
    reports: int,
    keep: int | None,
    validation_share: float,
    runs: int = 10,
    seed: int = 7,
    root: str = ROOT,
    ids: IdKind = "foreign",
) -> Iterator[bytes]:
    """`reports` checkpoint reports spread over `runs`, under `root`; a share asks for validation,
    whose result arrives a few reports later (as an evaluator would answer). `ids`: "foreign" ids
    (`rep-{i}`, `val-{path}`), or the structured ids ckptlog's clients send (contract §3
    "Deduplication": a Reporter's `ck1:r:0:{index}:{run}`, an Evaluator's result named by its
    request's offset, here the report's number)."""
    rng = random.Random(seed)
    for r in range(runs):
        yield _event(
            f"start-{r}",
            "run_started",
            f"run-{r}",
            {
                "storage_path": f"{root}/run-{r}",
                "checkpoint_config": {
                    "num_to_keep": keep,
                    "checkpoint_score_attribute": "val/acc",
                    "checkpoint_score_order": "max",
                },
            },
        )
    waiting: list[tuple[int, str, str, int]] = []
    for i in range(reports):
        run_id = f"run-{i % runs}"
        path = f"{root}/{run_id}/ckpt-{i:08d}"
        validate = rng.random() < validation_share
        yield _event(
            f"rep-{i}" if ids == "foreign" else f"ck1:r:0:{i // runs}:{run_id}",
            "report",
            run_id,
            {
                "metrics": {"val": {"acc": round(rng.random(), 6)}, "loss": rng.random(), "step": i},
                "checkpoint": {"path": path},
                "validation": validate,
            },
        )
        if validate:
            waiting.append((i + rng.randint(5, 50), run_id, path, i))
        while waiting and waiting[0][0] <= i:
            _, vrun, vpath, asked = waiting.pop(0)
            yield _event(
                f"val-{vpath}" if ids == "foreign" else f"ck1:v:bench:0:1:{asked}:{vrun}",
                "validation_result",
                vrun,
                {"checkpoint_path": vpath, "status": "VALIDATED", "metrics": {"val": {"acc": round(rng.random(), 6)}}},
            )


def write(path: Path, reports: int, keep: int | None, validation_share: float, ids: IdKind = "foreign") -> int:
    count = 0
    with path.open("wb") as out:
        for line in events(reports, keep, validation_share, ids=ids):
            out.write(line)
            count += 1
    return count
