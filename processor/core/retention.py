"""Top-K retention (SPEC §3 "Retention"): evict `checkpoints[:-num_to_keep]` minus the
latest and every pending checkpoint.

Only the first `len - num_to_keep` records are looked at, and each eviction is an
O(log n) removal, so the cost per event is O(log n + exempt), not Ray's O(n) rebuild.
"""

from __future__ import annotations

from processor.core.state import CheckpointRecord, RunState


def apply_retention(run: RunState, excess: int) -> list[CheckpointRecord]:
    """Evict what falls outside the top `num_to_keep` (`excess` = kept - num_to_keep > 0);
    returns the evicted records in order.

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
            checkpoints.pop(at)
            victims.append(record)
    by_key, outstanding = run.by_key, run.outstanding
    for record in victims:
        del by_key[record.key]
        outstanding[record.key] = record.path
    return victims
