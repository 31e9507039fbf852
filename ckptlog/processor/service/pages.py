"""The records that carry a run's VIEW on the state topic, bounded in size (contract §7).

A run keeping few checkpoints is one record, its whole VIEW (key = run id). A run keeping
many — keep-all is Ray's default, and a long job keeps hundreds of thousands — would make that
record larger than any broker accepts, and rewriting it after every report would cost O(n). So
past `PAGED_FROM` kept checkpoints (or a VIEW over `BUDGET` bytes) a run is published as a
*head* (the VIEW with `checkpoints: []` and `pages: {span}`) plus *page records*: page k holds
the kept checkpoints whose report index lies in [k * span, (k + 1) * span), in report order,
each with the value it sorts by; a page over `BUDGET` bytes is split in parts. After a change
only the pages it touched are written again (a report touches the last page, an eviction the
evicted record's page), parts first, then part 0 (naming how many parts there are), then the
head, all in the batch's transaction and on the head's partition (producers route a page key
by its run id) — so a reader that reaches a head has read every part it names. A page left
empty is tombstoned. Readers assemble (ckptlog.events.view.assemble); the contract is ckptlog/events/view.py.

Which kept record lies in which page is an index built from the run's state the first time the
run is paged here (after a restart, too: all its pages are then written once) and kept up to
date from the outputs of each event.

A pager that starts paging a run cannot know what page records an earlier owner of the partition
(or an earlier task of this one) left on the topic: its index starts empty. So that first write
also tombstones every page up to the run's last one (the page of its newest report) that holds
nothing kept now. That is exact: an earlier owner published only states of a prefix of this log,
so its pages cover report indices below the report count the new index is built at, except under at_least_once, where a
batch published but not committed may reach further — and those reports are folded live again,
so their pages are rewritten or tombstoned by the index (and assemble never merges an entry at or
above the head's `committed`). The cost, once per run per pager: one tombstone per empty page
(docs/processor.md, Bounded views).

Every state record carries `__ckptlog.input.offset` (ckptlog.events.state): the offset of the last input
record of its batch, which orders a run's heads for readers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ckptlog.events.envelope import encode_json
from ckptlog.events.outputs import CHECKPOINT_EVICTED, CHECKPOINT_REGISTERED, CHECKPOINT_STATUS_CHANGED
from ckptlog.events.view import page_key
from ckptlog.kafka.records import Header, OutRecord
from ckptlog.processor.core.outputs import Output
from ckptlog.processor.core.state import CheckpointRecord, RunState
from ckptlog.processor.core.view import run_view, view_head

SPAN = 32  # report indices per page: a keep-all run rewrites ~16 entries per report, not its whole view
PAGED_FROM = 256  # kept checkpoints past which a run is paged
BUDGET = 512 * 1024  # bytes of one record's value beyond which it is split (the broker default max is 1 MiB)
_REGISTERED, _EVICTED = CHECKPOINT_REGISTERED.name, CHECKPOINT_EVICTED.name
_TOUCHING = frozenset({_REGISTERED, _EVICTED, CHECKPOINT_STATUS_CHANGED.name})  # outputs that name a kept record


class ViewPager:
    """The state-topic records of one partition's runs (see the module docstring)."""

    def __init__(self, state_topic: str, span: int = SPAN, paged_from: int = PAGED_FROM, budget: int = BUDGET) -> None:
        self.topic, self.span, self.paged_from, self.budget = state_topic, span, paged_from, budget
        self._index: dict[str, dict[int, dict[int, CheckpointRecord]]] = {}  # run -> page -> index -> record
        self._dirty: dict[str, set[int]] = {}  # run -> pages touched since they were last written
        self._parts: dict[tuple[str, int], int] = {}  # (run, page) -> parts last written

    def note(self, run: RunState, outputs: Sequence[Output]) -> None:
        """Keep a paged run's index up to date with one event's outputs (cheap for other runs)."""
        index = self._index.get(run.run_id)
        if index is None:
            return
        dirty = self._dirty.setdefault(run.run_id, set())
        for kind, data in outputs:
            if kind not in _TOUCHING:
                continue
            report_index = data["report_index"]
            page = report_index // self.span
            dirty.add(page)
            entries = index.setdefault(page, {})
            if kind == _EVICTED:
                entries.pop(report_index, None)
            elif kind == _REGISTERED and run.latest is not None:
                record = run.latest if run.latest.report_index == report_index else None
                if record is not None:
                    entries[report_index] = record

    def records(self, run: RunState, headers: tuple[Header, ...] = ()) -> list[OutRecord]:
        """The records publishing the run's current VIEW, each with `headers`."""
        run_id, key = run.run_id, run.run_id.encode()
        if len(run.checkpoints) <= self.paged_from and run.run_id not in self._index:
            value = encode_json(run_view(run))
            if len(value) <= self.budget:
                return [OutRecord(self.topic, key, value, headers)]
        if run_id not in self._index:
            self._start_paging(run)
        out = self._pages(run, headers)
        out.append(OutRecord(self.topic, key, encode_json(view_head(run, self.span)), headers))
        return out

    def _start_paging(self, run: RunState) -> None:
        """Index the run's kept checkpoints, and mark every page up to its last one dirty: written
        again if it holds something, else tombstoned (whatever an earlier owner left there)."""
        index: dict[int, dict[int, CheckpointRecord]] = {}
        for record in run.checkpoints:
            index.setdefault(record.report_index // self.span, {})[record.report_index] = record
        self._index[run.run_id] = index
        self._dirty[run.run_id] = set(index).union(range(-(-run.report_count // self.span)))

    def _pages(self, run: RunState, headers: tuple[Header, ...]) -> list[OutRecord]:
        """The records of every page touched since it was last written: parts, then part 0; a
        tombstone for a page with nothing kept (its part 0 at least: assemble merges no part
        without one)."""
        run_id, index = run.run_id, self._index[run.run_id]
        out: list[OutRecord] = []
        for page in sorted(self._dirty.pop(run_id, ())):
            records = sorted(index.get(page, {}).values(), key=lambda r: r.report_index)
            if not records:
                index.pop(page, None)
                for part in range(self._parts.pop((run_id, page), 1)):
                    out.append(OutRecord(self.topic, page_key(run_id, page, part).encode(), None, headers))
                continue
            out.extend(self._parts_of(run, page, records, headers))
        return out

    def _parts_of(
        self, run: RunState, page: int, records: list[CheckpointRecord], headers: tuple[Header, ...]
    ) -> list[OutRecord]:
        entries = [encode_json(_entry(record)) for record in records]
        chunks: list[list[bytes]] = [[]]
        size = 0
        for entry in entries:
            if chunks[-1] and size + len(entry) > self.budget:
                chunks.append([])
                size = 0
            chunks[-1].append(entry)
            size += len(entry) + 1
        run_id, parts = run.run_id, len(chunks)
        previous = self._parts.get((run_id, page), 1)
        self._parts[(run_id, page)] = parts
        out = [
            OutRecord(self.topic, page_key(run_id, page, part).encode(), None, headers)
            for part in range(parts, previous)
        ]
        for part in [*range(1, parts), 0]:  # part 0 last: it names how many parts there are
            head = encode_json({"run": run_id, "page": page, "part": part, "parts": parts})
            value = head[:-1] + b',"checkpoints":[' + b",".join(chunks[part]) + b"]}"
            out.append(OutRecord(self.topic, page_key(run_id, page, part).encode(), value, headers))
        return out

    def retired(self, run: RunState) -> None:
        """The run left the fold's hot state (finished, contract §3): its final VIEW is published,
        and no record of it changes again, so what is kept to rewrite its pages goes."""
        if run.run_id in self._index:
            self.forget(run.run_id)
            for page in range(-(-run.report_count // self.span)):
                self._parts.pop((run.run_id, page), None)

    def tombstones(self, run_id: str, run: RunState | None, headers: tuple[Header, ...] = ()) -> list[OutRecord]:
        """The records deleting a forgotten run's VIEW: its pages' parts (for a run published as
        pages, when its state is at hand) and its head, last."""
        out: list[OutRecord] = []
        if run is not None and (run_id in self._index or len(run.checkpoints) > self.paged_from):
            for page in range(-(-run.report_count // self.span)):
                for part in range(self._parts.pop((run_id, page), 1)):
                    out.append(OutRecord(self.topic, page_key(run_id, page, part).encode(), None, headers))
            self.forget(run_id)
        out.append(OutRecord(self.topic, run_id.encode(), None, headers))
        return out

    def forget(self, run_id: str) -> None:
        """Drop what is kept about a run (its partition was closed)."""
        self._index.pop(run_id, None)
        self._dirty.pop(run_id, None)


def _entry(record: CheckpointRecord) -> dict[str, Any]:
    has, value, _ = record.sort_key
    entry = {
        "path": record.path,
        "metrics": record.metrics,
        "status": record.status,
        "report_index": record.report_index,
        "sort": value if has else None,
    }
    if record.preserved is not None:
        entry["preserved"] = record.preserved
    return entry
