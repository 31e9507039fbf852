"""Top-K retention (contract §3 "Retention"): evict `checkpoints[:-num_to_keep]` minus the
latest and every pending checkpoint — and, beyond Ray, minus the checkpoints the retention rules
(ckptlog/events/retention_rules.py: every N steps, Orbax's keep_period; one per time interval,
its keep_time_interval) preserved for good, which do not count against `num_to_keep` either.

Only the head of the sorted list is looked at, up to `excess` records that count, and each
eviction is an O(log n) removal, so the cost per event is O(log n + exempt), not Ray's O(n)
rebuild. An evicted path stays live (outstanding) until its deletion is settled, so it keeps
its place in the run's nesting index until then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ckptlog.processor.core import journal as undo
from ckptlog.processor.core.state import CheckpointRecord, Evicted, RunState


class Preservation(NamedTuple):
    """What the rules say of one new checkpoint: its label (None: not preserved), the rules' state
    afterwards (the run's own dict when no rule changed it), and the warnings (code, message) of
    the rules that could not decide."""

    label: str | None
    rule_state: dict[str, Any]
    problems: tuple[tuple[str, str], ...]


_new = tuple.__new__  # builds `Retained` and `Evicted` without their Python-level __new__ (one per eviction)


def preservation(
    run: RunState, path: str, metrics: dict[str, Any], report_index: int, time: str | None
) -> Preservation:
    """Whether a checkpoint registered now is preserved, and by which rule (the first in the
    table's order that does); pure. Every rule that is on sees every checkpoint, also one an
    earlier rule preserves (the time rule's reference time moves then too)."""
    config, state = run.config, run.rule_state
    label = changed = None
    problems: tuple[tuple[str, str], ...] = ()
    for rule in run.rules:
        name = rule.state
        old = None if name is None else state.get(name)
        preserve, new, problem = rule.decide(config, metrics, report_index, time, old)
        if preserve and label is None:
            label = rule.label
        if new != old:
            changed = changed or dict(state)  # a new dict: the journal restores the old one on a fault
            changed[name] = new  # type: ignore[index]  # a rule without state returns the None it got
        if problem is not None:
            problems += ((problem, rule.warning(config, run.run_id, path, problem)),)
    return _new(Preservation, (label, state if changed is None else changed, problems))


class Retained(NamedTuple):
    """What one retention did: the evicted records in order, each with its eviction number and its
    rank (1 = best among the checkpoints that count) before the eviction, and the worst record the
    rule keeps (rank `num_to_keep`; None when nothing that counts is kept)."""

    evicted: list[tuple[CheckpointRecord, int, int]]
    worst_kept: CheckpointRecord | None


def apply_retention(run: RunState, excess: int, push: Callable[[tuple[Any, ...]], None]) -> Retained:
    """Evict what falls outside the top `num_to_keep` among the checkpoints that count (`excess`
    = counted kept - num_to_keep > 0). `push` records the inverse of each change
    (ckptlog/processor/core/journal.py).

    Exempt records (latest, pending, preserved) stay where they are, so the i-th victim is popped
    at the position of the exempt records before it: no search per victim.
    """
    checkpoints = run.checkpoints
    latest, pending = run.latest, run.pending
    total = len(checkpoints) - run.preserved_count  # the records that count, ranked best = 1
    victims: list[tuple[int, CheckpointRecord, int]] = []  # (position in the list as it was, record, rank)
    counted, worst_kept = 0, None
    # without preserved records the first `excess` + 1 are all that can go or rank `num_to_keep` (a copy)
    for position, record in enumerate(checkpoints.head(excess + 1) if not run.preserved_count else checkpoints):
        if record.preserved is not None:
            continue
        if counted == excess:
            worst_kept = record
            break
        counted += 1
        if record is not latest and record.key not in pending:
            victims.append((position, record, total - counted + 1))
    for popped, (position, record, _) in enumerate(victims):
        push((undo.DROPPED, record))
        checkpoints.pop(position - popped)
    return _new(Retained, (_evict(run, victims, push), worst_kept))


def _evict(
    run: RunState, victims: list[tuple[int, CheckpointRecord, int]], push: Callable[[tuple[Any, ...]], None]
) -> list[tuple[CheckpointRecord, int, int]]:
    by_key, outstanding = run.by_key, run.outstanding
    evicted = []
    for _, record, rank in victims:
        key = record.key
        push((undo.OLD, by_key, key, record))
        del by_key[key]
        push((undo.NEW, outstanding, key))
        eviction = run.evictions
        outstanding[key] = _new(Evicted, (record.path, eviction))
        run.evictions = eviction + 1
        evicted.append((record, eviction, rank))
    return evicted
