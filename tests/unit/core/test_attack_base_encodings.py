"""Attacks on the entries a base reuses (contract §6 *Encodings kept*, core/delta.py `Encodings`):
inputs that touch a run without changing it or change it and are then undone — a duplicate
(the dedup state), an event refused (after a finish, for a refused run), an event whose outputs
failed and which the batch rolls back (`Fold.rollback_last`, service/batch.py `_unapply`) — each
while a capture is in flight or between snapshots. Oracle: every base is byte for byte the base
encoded from scratch of that moment, and every entry kept is its run's entry now unless changed.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import factories as f
from tests.unit.core.test_base_encodings import Partition, full
from tests.unit.core.test_delta import lives
from tests.unit.core.test_fold_properties import SETTINGS

ACTIONS = ("dup", "dup", "unapply", "snap", "snap", "step", "write", "write", "fail", "abandon", "restore")


def unapply(partition: Partition, raw: bytes) -> None:
    """Apply an event, then roll it back as a batch does whose outputs for it failed (only an event
    applied with outputs is: service/batch.py `emit`): then it is not in the log; else it stays."""
    before = full(partition.fold, 0)
    effects = partition.fold.apply(f.event(raw))
    if effects.rejection is None and effects.outputs and not effects.duplicate:
        partition.fold.rollback_last()
        assert full(partition.fold, 0) == before
    else:
        partition.log.append(raw)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lives(),
    st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, 10**6)), min_size=1, max_size=120),
    st.integers(0, 3),
)
def test_duplicates_refusals_and_rolled_back_events_never_leave_a_stale_entry(
    lines: list[bytes], actions: list[tuple[str, int]], max_deltas: int
) -> None:
    partition = Partition(dataclasses.replace(SETTINGS, finished_runs_kept=1))
    events = iter(lines)
    for action, pick in actions:
        raw = next(events, None)  # each step folds the next input (or rolls it back: "unapply")
        if raw is not None and action == "unapply":
            unapply(partition, raw)
        elif raw is not None:
            partition.fold.apply(f.event(raw))
            partition.log.append(raw)
        if action == "dup" and partition.log:  # an earlier input again: a duplicate, or refused now
            raw = partition.log[pick % len(partition.log)]
            partition.fold.apply(f.event(raw))
            partition.log.append(raw)
        partition.act(action, max_deltas, same_kept=pick % 2 == 0)  # "dup", "unapply": the rule checked only
    if partition.capture is not None:
        partition.finish(written=True)
    base = partition.snap(None)
    assert base is not None
    partition.finish(written=True)  # asserts the base equals the one encoded from scratch
    assert len(partition.kept) == len(partition.fold.runs)
