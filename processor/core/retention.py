"""Top-K retention (SPEC §3 "Retention"): evict `checkpoints[:-num_to_keep]` minus the
latest and every pending checkpoint.

Only the first `len - num_to_keep` records are looked at, and each eviction is an
O(log n) removal, so the cost per event is O(log n + exempt), not Ray's O(n) rebuild.
"""

from __future__ import annotations

from processor.core.state import CheckpointRecord, RunState


def apply_retention(run: RunState, excess: int) -> list[CheckpointRecord]:
    """Evict what falls outside the top `num_to_keep` (`excess` = kept - num_to_keep > 0);
    returns the evicted records in order."""
    checkpoints = run.checkpoints
    latest, pending = run.latest, run.pending
    if excess == 1:  # one report in, one out: the steady state of top-K
        worst = checkpoints.first()
        if worst is latest or worst.key in pending:
            return []
        checkpoints.remove_first()
        victims = [worst]
    else:
        victims = [r for r in checkpoints.head(excess) if r is not latest and r.key not in pending]
        for record in victims:
            checkpoints.remove(record)
    by_key, outstanding = run.by_key, run.outstanding
    for record in victims:
        del by_key[record.key]
        outstanding[record.key] = record.path
    return victims
