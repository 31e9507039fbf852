"""The demo's evaluator function: reads the checkpoint from disk and returns a seeded score.

Checkpoints at steps 4, 13, 22, ... are "slow" (sleep past the 0.6 s limit: VALIDATION_TIMEOUT)
and those at steps 6, 17, 28, ... raise (VALIDATION_FAILED); the rest get a score seeded by
the run name and step, so reruns agree.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

SLOW_S = 1.0


def local_path(url: str) -> Path:
    return Path(url.removeprefix("file://"))


def validate_checkpoint(checkpoint_path: str, *, dataset: str = "val", seed: int = 0) -> dict[str, Any]:
    """`fn(checkpoint_path, **fn_kwargs) -> metrics`, as `ckptlog evaluate --fn` calls it."""
    state = json.loads((local_path(checkpoint_path) / "model.json").read_text())
    name = "/".join(checkpoint_path.rstrip("/").split("/")[-2:])  # run/ckpt-NNN: stable across demo runs
    rng = random.Random(f"{seed}:{name}")
    step = int(state["step"])
    if step % 11 == 6:
        raise RuntimeError(f"evaluation on {dataset!r} crashed (simulated CUDA OOM)")
    time.sleep(SLOW_S if step % 9 == 4 else rng.uniform(0.02, 0.15))
    quality = float(state["quality"])
    return {"eval": {"acc": round(min(0.999, quality + rng.gauss(0, 0.03)), 4), "dataset": dataset}}
