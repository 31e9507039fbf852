"""Top-K retention (contract §3 "Retention"): evict `checkpoints[:-num_to_keep]` minus the
latest and every pending checkpoint.

Only the first `len - num_to_keep` records are looked at, and each eviction is an
O(log n) removal, so the cost per event is O(log n + exempt), not Ray's O(n) rebuild.
An evicted path stays live (outstanding) until its deletion is settled, so it keeps its
place in the run's nesting index until then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from processor.core import journal as undo
from processor.core.state import CheckpointRecord, Evicted, RunState


def apply_retention(
    run: RunState, excess: int, push: Callable[[tuple[Any, ...]], None]
) -> list[tuple[CheckpointRecord, int]]:
    """Evict what falls outside the top `num_to_keep` (`excess` = kept - num_to_keep > 0);
    returns the evicted records in order, each with its eviction number. `push` records the
    inverse of each change (processor/core/journal.py).

    Exempt records stay where they are, so the i-th victim is popped at the position of the
    exempt records before it: no search per victim.
    """
    checkpoints = run.checkpoints
    latest, pending = run.latest, run.pending
    victims = []
    at = 0  # exempt records seen so far, all still at the head of the list
    for record in checkpoints.head(excess):
        if record is latest or record.key in pending:
            at += 1
        else:
            push((undo.DROPPED, record))
            checkpoints.pop(at)
            victims.append(record)
    by_key, outstanding = run.by_key, run.outstanding
    evicted = []
    for record in victims:
        key = record.key
        push((undo.OLD, by_key, key, record))
        del by_key[key]
        push((undo.NEW, outstanding, key))
        eviction = run.evictions
        outstanding[key] = Evicted(record.path, eviction)
        run.evictions = eviction + 1
        evicted.append((record, eviction))
    return evicted
