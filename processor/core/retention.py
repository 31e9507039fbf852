"""Top-K retention (SPEC §3 "Retention"): evict `checkpoints[:-num_to_keep]` minus the
latest and every pending checkpoint.

Only the first `len - num_to_keep` records are looked at, and each eviction is an
O(log n) removal, so the cost per event is O(log n + exempt), not Ray's O(n) rebuild.
"""

from __future__ import annotations

from processor.core.state import CheckpointRecord, RunState


def apply_retention(run: RunState) -> list[CheckpointRecord]:
    """Evict what falls outside the top `num_to_keep`; returns the evicted records in order."""
    keep = run.config.num_to_keep
    if keep is None:
        return []
    excess = len(run.checkpoints) - keep
    if excess <= 0:
        return []
    latest, pending = run.latest, run.pending
    victims = [
        record
        for record in run.checkpoints.head(excess)
        if record is not latest and record.key not in pending
    ]
    for record in victims:
        run.checkpoints.remove(record)
        del run.by_key[record.key]
        run.outstanding[record.key] = record.path
    return victims
