"""Fold a batch of consumed records into the records to publish: the hot path.

Pure with respect to Kafka: records in, `Batch` out. Records below `publish_from` (already
published by an earlier owner: the group's committed offset) only rebuild state.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ckptlog.events.codec import decode_event
from ckptlog.events.decoded import DecodedEvent, RootRefused, RunForgotten, RunStarted
from ckptlog.events.outputs import WATERMARK
from ckptlog.events.rejections import Reason, Rejection
from ckptlog.events.state import H_INPUT_OFFSET
from ckptlog.kafka.records import InputRecord, OutRecord
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.outputs import Deletion, Output
from ckptlog.processor.core.rejections import internal_error
from ckptlog.processor.core.state import RunState
from ckptlog.processor.service.pages import ViewPager
from ckptlog.processor.service.records import RecordFactory

log = logging.getLogger(__name__)

K = TypeVar("K")
_WATERMARK = WATERMARK.name
_NOTED = frozenset({RunStarted, RunForgotten, RootRefused})  # the applied events the batch notes beyond their outputs
Marks = dict[str, tuple[int, int, Output]]
"""Run id -> the batch's last watermark of the run: (input offset, sequence, output) (contract §4)."""


@dataclass(slots=True)
class Batch:
    records: list[OutRecord] = field(default_factory=list)
    deletions: list[Deletion] = field(default_factory=list)
    claims: list[tuple[str, str]] = field(default_factory=list)  # (root, run id) registered: markers to write
    retired: list[tuple[str, str]] = field(default_factory=list)  # (root, run id) of runs retired: retired claims
    started: dict[str, InputRecord] = field(default_factory=dict)  # run id -> its first run_started applied
    reopened: list[tuple[str, str]] = field(default_factory=list)  # (root, run id) of runs reopened: theirs go
    consumed: int = 0
    applied: int = 0
    rejected: int = 0
    duplicates: int = 0
    live: bool = False  # the batch reaches publish_from: its offsets must be committed
    # counted into plain dicts while folding, handed to the metrics once per batch (service/metrics.py):
    views: int = 0  # state records (views and view pages)
    kinds: dict[type, int] = field(default_factory=dict)  # decoded event class -> events
    reasons: dict[tuple[str, str], int] = field(default_factory=dict)  # (reason, stage) -> rejections
    outputs: dict[str, int] = field(default_factory=dict)  # output type -> records (live ones only)
    dead: dict[str, int] = field(default_factory=dict)  # reason -> dead letters

    def merge(self, other: Batch) -> None:
        self.records.extend(other.records)
        self.deletions.extend(other.deletions)
        self.claims.extend(other.claims)
        self.retired.extend(other.retired)
        for run_id, record in other.started.items():
            self.started.setdefault(run_id, record)
        self.reopened.extend(other.reopened)
        self.consumed += other.consumed
        self.applied += other.applied
        self.rejected += other.rejected
        self.duplicates += other.duplicates
        self.live |= other.live
        self.views += other.views
        _add(self.kinds, other.kinds)
        _add(self.reasons, other.reasons)
        _add(self.outputs, other.outputs)
        _add(self.dead, other.dead)


def _add(into: dict[K, int], counts: dict[K, int]) -> None:
    for key, count in counts.items():
        into[key] = into.get(key, 0) + count


class BatchFolder:
    def __init__(self, fold: Fold, factory: RecordFactory) -> None:
        self.fold, self.factory = fold, factory
        # the decode limits are fold settings: they decide which records are applied (contract §6)
        self.max_bytes, self.max_depth = fold.settings.max_payload_bytes, fold.settings.max_depth
        fold.roots.fresh = []  # the roots each batch registers, for their ownership markers
        self.pager = ViewPager(factory.names.state)  # each changed run's VIEW, bounded in size

    def fold_records(self, records: Sequence[InputRecord], publish_from: int) -> Batch:
        batch = Batch(consumed=len(records), live=bool(records) and records[-1].offset >= publish_from)
        out, changed = batch.records, dict[str, RunState]()
        forgotten: dict[str, RunState | None] = {}  # runs whose VIEW is tombstoned (contract §3 "Forgotten runs")
        marks: Marks = {}  # one watermark per run per batch, published after the batch's outputs
        apply, factory, note, runs = self.fold.apply, self.factory, self.pager.note, self.fold.runs
        max_bytes, max_depth = self.max_bytes, self.max_depth
        applied, deletions, kinds, kinds_get = 0, batch.deletions, batch.kinds, batch.kinds.get
        counts, counts_get = batch.outputs, batch.outputs.get
        for record in records:
            offset, value = record.offset, record.value
            live = offset >= publish_from
            event: DecodedEvent | Rejection
            if value is None:
                event = Rejection(
                    Reason.INVALID_ENVELOPE,
                    "record has no value (a tombstone); input records must be CloudEvents JSON objects",
                )
            else:
                event = decode_event(value, record.key, max_bytes=max_bytes, max_depth=max_depth)
            if isinstance(event, Rejection):
                self._reject(batch, record, event, "decode", live)
                continue
            kind = event.__class__
            kinds[kind] = kinds_get(kind, 0) + 1
            effects = apply(event)
            if effects.rejection is not None:
                self._reject(batch, record, effects.rejection, "fold", live)
                continue
            if effects.duplicate:
                batch.duplicates += 1
                continue
            applied += 1
            if live:
                outputs = effects.outputs
                if outputs:
                    subject, mark, last = event.subject, len(out), len(outputs) - 1
                    coalesced = outputs[last][0] == _WATERMARK  # the fold puts an event's watermark last
                    published = outputs[:last] if coalesced else outputs
                    try:
                        factory.outputs(subject, offset, published, out)
                        # None: an event that warns about a run it did not create; `leaving`: a run it retired
                        run = runs.get(subject) or self.fold.leaving.get(subject)
                        if run is not None:
                            note(run, outputs)
                    except Exception as exc:  # the outputs cannot be written: the event is not applied either
                        del out[mark:]
                        applied -= 1
                        self._unapply(batch, record, event, exc, live)
                        continue
                    if run is not None:
                        changed[subject] = run
                    if coalesced:  # replaces the run's earlier one of this batch: the last change's values
                        marks[subject] = (offset, last, outputs[last])
                    for name, _ in published:
                        counts[name] = counts_get(name, 0) + 1
                if effects.deletions:
                    deletions.extend(effects.deletions)
                if self.fold.leaving:
                    self._retired(batch)
                if self.fold.reopening:
                    self._reopened(batch)
                if kind in _NOTED:
                    self._noted(kind, event.subject, record, batch, changed, forgotten)
        batch.applied += applied
        if self.fold.roots.fresh:
            claimed = self.fold.roots.claimed()
            if batch.live:  # a replay's roots are claimed as it catches up (PartitionTask.catch_up): by then a
                # run started and finished in the replay is finished, and gets its retired claim alone —
                # claiming it as live here would meet its own retired claim and report it as shared
                batch.claims = claimed
        if marks:
            self._watermarks(marks, out, counts)
        before = len(out)
        stamp = (
            ((H_INPUT_OFFSET, str(records[-1].offset).encode()),) if changed or forgotten else ()
        )  # orders heads (ckptlog.events.state)
        for changed_run in changed.values():  # the object: a run retired since is published as it left
            out.extend(self.pager.records(changed_run, stamp))
            if changed_run.finished is not None and changed_run.run_id not in runs:
                self.pager.retired(changed_run)
        for run_id, gone in forgotten.items():
            out.extend(self.pager.tombstones(run_id, gone, stamp))
        batch.views = len(out) - before
        return batch

    def _retired(self, batch: Batch) -> None:
        """The roots of the runs the last event retired: their retired claims (storage/claims.py). A run
        refused for a link to its root gets none: no walk goes through the link (contract §9). Of a run
        reopened and retired again in one batch only the retirement counts (and vice versa)."""
        symlinked = self.fold.symlinked
        leaving = self.fold.leaving.values()
        for claim in [(run.root, run.run_id) for run in leaving if run.storage_root and run.run_id not in symlinked]:
            if claim in batch.reopened:
                batch.reopened.remove(claim)
            batch.retired.append(claim)

    def _reopened(self, batch: Batch) -> None:
        """The roots of the runs the last event brought back from retirement: their retired claims go."""
        for claim in [(run.root, run.run_id) for run in self.fold.reopening.values() if run.storage_root]:
            if claim in batch.retired:
                batch.retired.remove(claim)
            batch.reopened.append(claim)

    def _noted(
        self,
        kind: type,
        run_id: str,
        record: InputRecord,
        batch: Batch,
        changed: dict[str, RunState],
        gone: dict[str, RunState | None],
    ) -> None:
        """An applied run_started, run_forgotten or root_refused of a live record: the first run_started
        of each run (its dead letter, should its root be found behind a link: service/linked.py); a run
        whose state left (forgotten, refused for a link: contract §3, §9) has its VIEW tombstoned."""
        if kind is RunStarted:
            batch.started.setdefault(run_id, record)
        elif kind is RunForgotten or run_id in self.fold.leaving:  # a root_refused that refused the run
            changed.pop(run_id, None)
            gone[run_id] = self.fold.leaving.get(run_id)

    def _watermarks(self, marks: Marks, out: list[OutRecord], counts: dict[str, int]) -> None:
        """The batch's one watermark per run (contract §4): the one the run's last change in the batch
        made, with that input record's output id (contract §5), so a replay of the same batches gives
        the same records and any batching gives ids that each name one and the same watermark."""
        output = self.factory.outputs
        for run_id, (offset, sequence, mark) in marks.items():
            output(run_id, offset, (mark,), out, sequence)
        counts[_WATERMARK] = counts.get(_WATERMARK, 0) + len(marks)

    def _unapply(self, batch: Batch, record: InputRecord, event: DecodedEvent, exc: Exception, live: bool) -> None:
        """Roll the fold back over an event whose outputs failed, and dead-letter it (contract §7)."""
        self.fold.rollback_last()
        self._reject(batch, record, internal_error(event.subject, event.type, exc), "fold", live)

    def _reject(self, batch: Batch, record: InputRecord, rejection: Rejection, stage: str, live: bool) -> None:
        batch.rejected += 1
        reason = str(rejection.reason)
        batch.reasons[reason, stage] = batch.reasons.get((reason, stage), 0) + 1
        if not live:
            return
        batch.dead[reason] = batch.dead.get(reason, 0) + 1
        batch.records.append(self.factory.dead_letter(record, rejection, stage))
        log.warning(
            "event=rejected at=%s[%d]@%d run=%r stage=%s reason=%s message=%r",
            record.topic,
            record.partition,
            record.offset,
            (record.key or b"").decode("utf-8", "replace")[:256],  # the run id, as the producer keyed it
            stage,
            rejection.reason,
            rejection.message,
        )
