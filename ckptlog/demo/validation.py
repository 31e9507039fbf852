"""The demo's evaluator function: reads the checkpoint from disk and returns a seeded score.

Every 9th-ish checkpoint is "slow" (sleeps past the 0.6 s limit: VALIDATION_TIMEOUT) and
every 13th-ish raises (VALIDATION_FAILED), chosen by a hash of the path so reruns agree.
"""

from __future__ import annotations

import hashlib
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
    digest = hashlib.sha256(f"{seed}:{checkpoint_path}".encode()).digest()
    rng = random.Random(digest)
    if digest[0] % 13 == 5:
        raise RuntimeError(f"evaluation on {dataset!r} crashed (simulated CUDA OOM)")
    time.sleep(SLOW_S if digest[1] % 9 == 4 else rng.uniform(0.02, 0.15))
    quality = float(state["quality"])
    return {"eval": {"acc": round(min(0.999, quality + rng.gauss(0, 0.03)), 4), "dataset": dataset}}
