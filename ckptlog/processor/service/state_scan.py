"""Read a state topic to its end decoding only the heads that can still be a run's newest
(`ckptlog inspect` on a topic of 10,000 runs, issue 24 item 5).

Until the log cleaner compacts it (the active segment is never compacted), a state topic holds
every VIEW the processor published: ~20 records a run for a run that reported 20 times. Of a
run's heads carrying the input-offset header (ckptlog/events/state.py, *Order*), the one that wins is the
readable one with the highest (offset, position), whatever else came in between, and whether the
run has a problem depends on its last record only. So a head with the header makes every earlier
head with the header at an offset up to its own irrelevant — if it is readable. `StateScan` keeps,
per run, only the heads not yet made irrelevant (and tombstones), without decoding them; at the
end it feeds them to the StateTable in topic order, which decodes them. When one of them turns
out unreadable, a head it made irrelevant may be the run's newest after all: the run is then
`unsure`, and the caller reads it again record by record (`StateTable.take`, every record).

A run with anything else — a page record, a head without the header, a key that is neither a run
id nor a page key, or not UTF-8 — is taken record by record as it comes, as before: the skipping
is for the plain case only. Each run's state in a StateTable is independent of the other runs',
so taking one run's records later than another's gives the same table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ckptlog.events.state import StateTable, input_offset
from ckptlog.events.view import PAGE_KEY_SEPARATOR, parse_page_key
from ckptlog.kafka.reader import Record


@dataclass(slots=True)
class _Held:
    records: list[tuple[Record, int | None]] = field(default_factory=list)  # (record, its offset header if a head)


@dataclass(slots=True)
class StateScan:
    """Records in, table out: `add` every record in topic order, then `finish`; `unsure` names the
    runs to read again record by record (see the module docstring)."""

    table: StateTable
    held: dict[str, _Held] = field(default_factory=dict)  # runs whose records are skipped where they can be
    direct: set[str] = field(default_factory=set)  # runs taken record by record
    unsure: set[str] = field(default_factory=set)

    def add(self, record: Record) -> None:
        key = record.key
        if key is None:
            return  # take ignores it
        name = _plain_run_id(key)
        if name is None:  # its run (a page's, or the key's own text) is taken record by record from now on
            self._go_direct(run_of(key))
            self._take(record)
            return
        if name in self.direct:
            self._take(record)
            return
        at = None if record.value is None else input_offset(record.headers)
        if record.value is not None and at is None:  # a head without the header: ordered by its VIEW
            self._go_direct(name)
            self._take(record)
            return
        held = self.held.setdefault(name, _Held())
        if at is not None:
            held.records = [(r, a) for r, a in held.records if a is None or a > at]
        held.records.append((record, at))

    def finish(self) -> None:
        """Take what is held; a run one of whose held records cannot be read is `unsure`."""
        for name in list(self.held):
            self._flush(name)

    def forget_unsure(self) -> None:
        """Drop what the table holds of the `unsure` runs: heads, page parts, problems (a page
        key's too), before they are read again."""
        for name in self.unsure:
            self.table.heads.pop(name, None)
            self.table.parts.pop(name, None)
        for key in [k for k, p in self.table.problems.items() if p.run_id in self.unsure]:
            del self.table.problems[key]

    def _go_direct(self, name: str) -> None:
        self._flush(name)
        self.direct.add(name)

    def _flush(self, name: str) -> None:
        """Take the run's held records; one that cannot be read makes the run `unsure`."""
        before = len(self.table.fresh)
        for record, _ in self.held.pop(name, _Held()).records:
            self._take(record)
        if len(self.table.fresh) > before:
            self.unsure.add(name)

    def _take(self, record: Record) -> None:
        where = f"{record.topic}[{record.partition}]@{record.offset}"
        self.table.take(where, record.key, record.value, record.headers)


def run_of(key: bytes) -> str:
    """The run a state record's key belongs to, as its `Problem.run_id` would name it: a page key's
    run id, else the key (text; bytes that are not UTF-8 escaped)."""
    name = key.decode("utf-8", "backslashreplace")
    page = parse_page_key(name)
    return page[0] if page is not None else name


def _plain_run_id(key: bytes) -> str | None:
    """The run id a head's key is; None for any other key (a page key, one that is not UTF-8 or
    holds the page separator: taken record by record)."""
    try:
        name = key.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if PAGE_KEY_SEPARATOR in name else name
