"""Storage faults the crash matrix injects between two instances (nothing runs then): the newest
delta of each partition's snapshot chain lost (`lose.delta`) or torn (`tear.delta`, half its bytes
under its name). A restore must detect either and fall back to an older restore point, replaying
more of the log (contract §6); the matrix's checks then compare everything with a clean fold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ckptlog.processor.storage.objects import ObjectStore

FAULTS = ("lose.delta", "tear.delta")


def damage(url: str, topic: str, partitions: int, fault: str, options: Mapping[str, Any] | None = None) -> list[str]:
    """Apply `fault` to the newest delta of each partition; the object names it hit."""
    store, hit = ObjectStore(url, options), []
    for partition in range(partitions):
        deltas = [n for n in store.list(f"{topic}/{partition}/") if n.rpartition("/")[2].startswith("delta-")]
        if not deltas:
            continue
        newest = deltas[-1]  # names sort by offset
        data = store.get(newest)
        store.delete(newest)
        if fault == "tear.delta":
            store.put_immutable(newest, data[: len(data) // 2])
        hit.append(newest)
    return hit
