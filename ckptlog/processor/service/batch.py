"""The in-memory stages of a batch, decode → apply → emit: the hot path.

`BatchFolder.fold_records` walks consumed records through them one by one, then ends the emit
stage for the batch as a whole (`seal`). Each stage is a method that can be called alone
(tests/unit/service/test_stages.py):

- `decode`: a record's bytes to the decoded event of its kind, or a `Rejection` (codec.py);
- `apply`: the event to the fold (core/fold.py), counted; its `Effects`;
- `emit`: an applied event's outputs as records (its watermark held back), its run noted for the
  batch's VIEW, its evictions collected, and the roots of the runs it retired or reopened (their
  retired claims to write or remove); a run's first run_started noted (its dead letter, should
  its root be found behind a symlink before the commit: service/linked.py), a run forgotten or
  refused for a link to its root noted for tombstones; `seal` after the batch's last record: the
  roots it registered, one watermark per run, each changed run's VIEW.

A rejection at decode or apply becomes a dead letter (`_reject`). Pure with respect to Kafka:
records in, `Batch` out. Records below `publish_from` (published by an earlier owner: the
group's committed offset) only rebuild state: they are decoded and applied, never emitted.
The durable stages, commit → after-commit, are `Pipeline`'s (pipeline.py), which is this class
with them added; `ckptlog replay` and the offline checks run this class alone.
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
from ckptlog.processor.core.outputs import DEFERRED_MARK, Deletion, Effects, Output, watermark
from ckptlog.processor.core.rejections import internal_error
from ckptlog.processor.core.state import RunState
from ckptlog.processor.service.pages import ViewPager
from ckptlog.processor.service.records import RecordFactory

log = logging.getLogger(__name__)

K = TypeVar("K")
_WATERMARK = WATERMARK.name
_NOTED = frozenset({RunStarted, RunForgotten, RootRefused})  # the applied events the batch notes beyond their outputs
Marks = dict[str, tuple[int, int, Output, RunState | None]]
"""Run id -> the batch's last watermark of the run: (input offset, sequence, output, the run), the output
`DEFERRED_MARK` for a report's or a validation result's, built from the run at `seal` (contract §4)."""
_TOMBSTONE = Rejection(
    Reason.INVALID_ENVELOPE, "record has no value (a tombstone); input records must be CloudEvents JSON objects"
)


@dataclass(slots=True)
class Batch:
    """One batch as it goes through the stages: what emit made, what the durable stages hand on, counts."""

    records: list[OutRecord] = field(default_factory=list)
    deletions: list[Deletion] = field(default_factory=list)
    claims: list[tuple[str, str]] = field(default_factory=list)  # (root, run id) registered: claims to write
    retired: list[tuple[str, str]] = field(default_factory=list)  # (root, run id) of runs retired: retired claims
    started: dict[str, InputRecord] = field(default_factory=dict)  # run id -> its first run_started applied
    reopened: list[tuple[str, str]] = field(default_factory=list)  # (root, run id) of runs reopened: theirs go
    consumed: int = 0
    applied: int = 0
    rejected: int = 0
    duplicates: int = 0
    live: bool = False  # the batch reaches publish_from: its offsets must be committed
    end: int = 0  # the offset after its last record: where the partition's committed offset moves to
    # counted into plain dicts while folding, handed to the metrics once per batch (service/metrics.py):
    views: int = 0  # state records (views and view pages)
    kinds: dict[type, int] = field(default_factory=dict)  # decoded event class -> events
    reasons: dict[tuple[str, str], int] = field(default_factory=dict)  # (reason, stage) -> rejections
    outputs: dict[str, int] = field(default_factory=dict)  # output type -> records (live ones only)
    dead: dict[str, int] = field(default_factory=dict)  # reason -> dead letters
    # what emit keeps for `seal` (read once there; `merge` leaves them, every part is sealed on its own):
    changed: dict[str, RunState] = field(default_factory=dict)  # runs whose VIEW the batch changed
    forgotten: dict[str, RunState | None] = field(default_factory=dict)  # runs tombstoned (contract §3, §9)
    marks: Marks = field(default_factory=dict)  # one watermark per run, published after the batch's outputs

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
        self.end = max(self.end, other.end)
        self.views += other.views
        _add(self.kinds, other.kinds)
        _add(self.reasons, other.reasons)
        _add(self.outputs, other.outputs)
        _add(self.dead, other.dead)


def _add(into: dict[K, int], counts: dict[K, int]) -> None:
    for key, count in counts.items():
        into[key] = into.get(key, 0) + count


class BatchFolder:
    """decode → apply → emit over one partition's fold (see the module docstring)."""

    def __init__(self, fold: Fold, factory: RecordFactory) -> None:
        self.fold, self.factory = fold, factory
        # the decode limits are fold settings: they decide which records are applied (contract §6)
        self.max_bytes, self.max_depth = fold.settings.max_payload_bytes, fold.settings.max_depth
        fold.roots.fresh = []  # the roots each batch registers, for their claims
        fold.defer_marks = True  # a report's watermark built once per run per batch, at seal (core/outputs.py)
        self.pager = ViewPager(factory.names.state)  # each changed run's VIEW, bounded in size

    def fold_records(self, records: Sequence[InputRecord], publish_from: int) -> Batch:
        """The in-memory stages over `records`: decode → apply → emit each (emit only from
        `publish_from` on), then `seal`. Decode and apply run inline here, as `decode` and `apply`
        do them (a Python call per stage and record was a tenth of this loop; test_batch.py holds
        the two walks equal), emit is called for an applied live event."""
        live_end = bool(records) and records[-1].offset >= publish_from
        batch = Batch(consumed=len(records), live=live_end, end=records[-1].offset + 1 if records else 0)
        emit, reject, fold_apply, kinds = self.emit, self._reject, self.fold.apply, batch.kinds
        max_bytes, max_depth = self.max_bytes, self.max_depth
        applied = duplicates = 0
        for record in records:
            live = record.offset >= publish_from
            value = record.value
            if value is None:
                event: DecodedEvent | Rejection = _TOMBSTONE
            else:
                event = decode_event(value, record.key, max_bytes=max_bytes, max_depth=max_depth)
            if isinstance(event, Rejection):
                reject(batch, record, event, "decode", live)
                continue
            kind = event.__class__
            kinds[kind] = kinds.get(kind, 0) + 1
            effects = fold_apply(event)
            if effects.rejection is not None:
                reject(batch, record, effects.rejection, "fold", live)
            elif effects.duplicate:
                duplicates += 1
            else:
                applied += 1
                if live:
                    emit(batch, record, event, effects)
        batch.applied += applied  # emit's undo of an event whose outputs failed took its count off already
        batch.duplicates += duplicates
        self.seal(batch)
        return batch

    def decode(self, record: InputRecord) -> DecodedEvent | Rejection:
        """Stage 1: the record's event (bounded JSON, the envelope, the decoded struct of its kind), or
        why it is none."""
        value = record.value
        if value is None:
            return _TOMBSTONE
        return decode_event(value, record.key, max_bytes=self.max_bytes, max_depth=self.max_depth)

    def apply(self, batch: Batch, event: DecodedEvent) -> Effects:
        """Stage 2: the event folded into the partition's state; counted by kind, and as applied or a
        duplicate (a rejection is the caller's to dead-letter)."""
        kind, kinds = event.__class__, batch.kinds
        kinds[kind] = kinds.get(kind, 0) + 1
        effects = self.fold.apply(event)
        if effects.rejection is None:
            if effects.duplicate:
                batch.duplicates += 1
            else:
                batch.applied += 1
        return effects

    def emit(self, batch: Batch, record: InputRecord, event: DecodedEvent, effects: Effects) -> None:
        """Stage 3 for one applied event at or past publish_from: its outputs as records, routed, with
        ids naming `record` (its watermark kept in `batch.marks` for `seal`); its run noted for the
        batch's VIEW; its evictions and the roots of the runs it retired or reopened collected; a
        run_started, run_forgotten or root_refused noted (`_noted`). Outputs that cannot be built
        undo the event, which is dead-lettered instead (contract §7)."""
        subject, fold = event.subject, self.fold
        outputs = effects.outputs
        if outputs:
            offset, last = record.offset, len(outputs) - 1
            coalesced = outputs[last][0] == _WATERMARK  # the fold puts an event's watermark last
            # None: an event that warns about a run it did not create; `leaving`: a run it retired
            run = fold.runs.get(subject) or fold.leaving.get(subject)
            published = (outputs[:last] if last else ()) if coalesced else outputs
            if published and not self._published(batch, record, event, published, run):
                return
            if run is not None:
                batch.changed[subject] = run
            if coalesced:  # replaces the run's earlier one of this batch: the last change's values
                batch.marks[subject] = (offset, last, outputs[last], run)
        if effects.deletions:
            batch.deletions.extend(effects.deletions)
        if fold.leaving:
            self._retired(batch)
        if fold.reopening:
            self._reopened(batch)
        kind = event.__class__
        if kind in _NOTED:
            self._noted(kind, subject, record, batch)

    def _published(
        self, batch: Batch, record: InputRecord, event: DecodedEvent, published: Sequence[Output], run: RunState | None
    ) -> bool:
        """An event's outputs but its coalesced watermark (a report without a checkpoint has none) as
        records, counted, and noted for its run's VIEW pages; False when they cannot be built: the
        event is undone and dead-lettered instead (contract §7)."""
        out = batch.records
        mark = len(out)
        try:
            self.factory.outputs(event.subject, record.offset, published, out)
            if run is not None:
                self.pager.note(run, published)
        except Exception as exc:  # the outputs cannot be written: the event is not applied either
            del out[mark:]
            self._unapply(batch, record, event, exc)
            return False
        counts = batch.outputs
        for name, _ in published:
            counts[name] = counts.get(name, 0) + 1
        return True

    def seal(self, batch: Batch) -> None:
        """Stage 3 for the batch as a whole, after its last record: the roots it registered (claimed
        only when live), one watermark per run after the batch's other outputs (contract §4), then
        each changed run's VIEW and each forgotten run's tombstones."""
        if self.fold.roots.fresh:
            claimed = self.fold.roots.claimed()
            if batch.live:  # a replay's roots are claimed as it catches up (PartitionTask.catch_up): by then a
                # run started and finished in the replay is finished, and gets its retired claim alone —
                # claiming it as live here would meet its own retired claim and report it as shared
                batch.claims = claimed
        if batch.marks:
            self._watermarks(batch)
        self._views(batch)

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
        """The roots of the runs the last event brought back from retirement: their retired claims go
        (after the commit: `Pipeline.after_commit`)."""
        for claim in [(run.root, run.run_id) for run in self.fold.reopening.values() if run.storage_root]:
            if claim in batch.retired:
                batch.retired.remove(claim)
            batch.reopened.append(claim)

    def _noted(self, kind: type, run_id: str, record: InputRecord, batch: Batch) -> None:
        """An applied run_started, run_forgotten or root_refused of a live record: the first run_started
        of each run (its dead letter, should its root be found behind a link: service/linked.py); a run
        whose state left (forgotten, refused for a link: contract §3, §9) has its VIEW tombstoned."""
        if kind is RunStarted:
            batch.started.setdefault(run_id, record)
        elif kind is RunForgotten or run_id in self.fold.leaving:  # a root_refused that refused the run
            batch.changed.pop(run_id, None)
            batch.forgotten[run_id] = self.fold.leaving.get(run_id)

    def _watermarks(self, batch: Batch) -> None:
        """The batch's one watermark per run (contract §4): the one the run's last change in the batch
        made, with that input record's output id (contract §5), so a replay of the same batches gives
        the same records and any batching gives ids that each name one and the same watermark."""
        output, out, marks = self.factory.outputs, batch.records, batch.marks
        for run_id, (offset, sequence, mark, run) in marks.items():
            if mark is DEFERRED_MARK and run is not None:  # a report's or result's: the run's values now
                mark = watermark(run)
            output(run_id, offset, (mark,), out, sequence)
        batch.outputs[_WATERMARK] = batch.outputs.get(_WATERMARK, 0) + len(marks)

    def _views(self, batch: Batch) -> None:
        """The state records of the batch: each changed run's VIEW (a run retired since as it left),
        each forgotten run's tombstones, stamped with the batch's last input offset (it orders heads,
        ckptlog.events.state)."""
        out, changed, forgotten = batch.records, batch.changed, batch.forgotten
        before = len(out)
        stamp = ((H_INPUT_OFFSET, str(batch.end - 1).encode()),) if changed or forgotten else ()
        for run in changed.values():
            out.extend(self.pager.records(run, stamp))
            if run.finished is not None and run.run_id not in self.fold.runs:
                self.pager.retired(run)
        for run_id, gone in forgotten.items():
            out.extend(self.pager.tombstones(run_id, gone, stamp))
        batch.views = len(out) - before

    def _unapply(self, batch: Batch, record: InputRecord, event: DecodedEvent, exc: Exception) -> None:
        """Roll the fold back over an event whose outputs failed, and dead-letter it (contract §7)."""
        batch.applied -= 1
        self.fold.rollback_last()
        self._reject(batch, record, internal_error(event.subject, event.type, exc), "fold", True)

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
