"""Folding one record is all or nothing (contract §7): the undo log of one event's mutations.

The fold's handlers decide every rejection before they mutate anything, but a fault while
applying an accepted event (a bug, a value no rule foresaw) could still leave a run half
changed, and a snapshot would then persist it. So every mutation of a run's containers pushes
its inverse here first; when applying the event raises, `rollback` undoes them in reverse and
restores the run's counters, and the fold dead-letters the event (`internal_error`).

Pushing a tuple costs ~40 ns, a few per event; the inverses run only after a fault. Orders that
state depends on are restored as they were: `pending` in report order (the `validated`
watermark reads its first entry), `outstanding` in eviction order. The sorted kept list is
undone by its inverse operations, and rebuilt from the kept records if one of those fails (the
fault may have been inside it).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ckptlog.processor.core.ordering import SortedRecords

if TYPE_CHECKING:
    from ckptlog.processor.core.state import RunState

NEW = 0  # (NEW, dict, key): key was absent
OLD = 1  # (OLD, dict, key, value): key held value
ADDED = 2  # (ADDED, record): inserted into the kept list
DROPPED = 3  # (DROPPED, record): removed from the kept list
FIELDS = 4  # (FIELDS, record, status, metrics, sort_key): a record's mutable fields before
RUN = 5  # (RUN, runs, run_id, run or None): the run object runs[run_id] was
CALL = 6  # (CALL, function, argument): call to undo (e.g. a registry entry)
SEEN = 7  # (SEEN, seen, ...): the run's dedup state changed (ckptlog/processor/core/dedup.py undoes it)

SCALARS = (
    "report_count",
    "index_in_generation",
    "generation",
    "latest",
    "evictions",
    "rule_state",
    "preserved_count",
    "finished",
    "reopened",
)
"""The run's counters and orders a rollback restores: saved before each event, whatever it changes."""
scalars: Callable[[RunState], tuple[Any, ...]] = attrgetter(*SCALARS)  # one C call per event


class Journal:
    """One event's undo log; `begin` before applying it, `rollback` if that raised."""

    __slots__ = ("entries", "push", "run", "saved")

    def __init__(self) -> None:
        self.entries: list[tuple[Any, ...]] = []
        self.push = self.entries.append
        self.run: RunState | None = None
        self.saved: tuple[Any, ...] | None = None

    def begin(self, run: RunState | None) -> None:
        self.entries.clear()
        self.run = run
        self.saved = scalars(run) if run is not None else None

    def rollback(self) -> None:
        """Undo every pushed mutation, newest first, then restore the run's counters and orders."""
        run, kept_ok, entries = self.run, True, self.entries
        for at in range(len(entries) - 1, -1, -1):
            entry = entries[at]
            kind = entry[0]
            if kind == NEW:
                entry[1].pop(entry[2], None)
            elif kind == OLD:
                entry[1][entry[2]] = entry[3]
            elif kind == FIELDS:
                record = entry[1]
                record.status, record.metrics, record.sort_key = entry[2], entry[3], entry[4]
            elif kind in (ADDED, DROPPED):
                kept_ok = kept_ok and run is not None and _undo_kept(run.checkpoints, kind, entry[1])
            elif kind == RUN:
                runs, run_id, before = entry[1], entry[2], entry[3]
                if before is None:
                    runs.pop(run_id, None)
                else:
                    runs[run_id] = before
            elif kind == CALL:
                entry[1](entry[2])
            elif kind == SEEN:
                entry[1].undo(entry)
        if run is None or self.saved is None:
            return
        for name, value in zip(SCALARS, self.saved, strict=True):
            setattr(run, name, value)
        if not kept_ok or len(run.checkpoints) != len(run.by_key):
            run.checkpoints = _rebuilt(run)
        run.pending = dict(sorted(run.pending.items(), key=lambda item: item[1].report_index))
        run.outstanding = dict(sorted(run.outstanding.items(), key=lambda item: item[1].eviction))
        run.rebuild_nesting()


def put_at(entry: tuple[dict[Any, Any], int, Any, Any]) -> None:
    """Undo a deletion from an ordered table: `(table, at, key, value)` puts the entry back at its
    place (a snapshot writes tables in their order, so a rollback keeps it; O(n), only on a fault)."""
    table, at, key, value = entry
    items = list(table.items())
    table.clear()
    table.update(items[:at])
    table[key] = value
    table.update(items[at:])


def _undo_kept(checkpoints: SortedRecords, kind: int, record: Any) -> bool:
    """The inverse of one kept-list change; False when it fails (the fault may have been in the list)."""
    try:
        if kind == ADDED:
            checkpoints.remove(record)
        else:
            checkpoints.add(record)
    except Exception:
        return False
    return True


def _rebuilt(run: RunState) -> SortedRecords:
    """The kept list anew from the kept records, loaded in one go (not by the insert path that
    may have been at fault)."""
    return SortedRecords.loaded(sorted(run.by_key.values(), key=lambda r: r.sort_key))
