"""The fold: a deterministic state machine over input events (contract §3–4, §7, §9).

`Fold.apply(event)` mutates only the run states it owns and returns `Effects`. No I/O,
no clock, no randomness: the same log always yields the same states and outputs, which
is what makes snapshot + replay equal an uninterrupted run. Rejections are decided before
anything is mutated, so a rejected event leaves the state untouched; and applying an
accepted event is all or nothing: a fault part-way is rolled back (ckptlog/processor/core/journal.py)
and the event rejected as `internal_error`. This is the one fold: the processor, `ckptlog
replay` and `ckptlog fold` all run it.

Reports and validation results (nearly all traffic) are handled here; run_started, restarts
and deletion completions in ckptlog/processor/core/lifecycle.py; run_finished and a finished run's
retirement from the hot state in ckptlog/processor/core/finishing.py; run_reopened in
ckptlog/processor/core/reopening.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from itertools import islice
from typing import Any

from ckptlog.events.decoded import (
    INPUT_KINDS,
    DecodedEvent,
    DeletionCompleted,
    Report,
    RootRefused,
    RunFinished,
    RunForgotten,
    RunReopened,
    RunStarted,
    ValidationResult,
    ValidationSpec,
)
from ckptlog.events.outputs import CHECKPOINT_REGISTERED, CHECKPOINT_STATUS_CHANGED, VALIDATION_REQUESTED
from ckptlog.events.paths import UnsafePath, normalize
from ckptlog.events.rejections import Rejection
from ckptlog.events.rules import validation_without_checkpoint
from ckptlog.processor.core import finishing, lifecycle, linked_roots
from ckptlog.processor.core import journal as undo
from ckptlog.processor.core.outputs import (
    DEFERRED_MARK,
    DUPLICATE,
    Deletion,
    Effects,
    Output,
    evicted,
    not_pending,
    rejected,
    score_warning,
    warning,
    watermark,
)
from ckptlog.processor.core.rejections import (
    checkpoint_key,
    duplicate_path,
    internal_error,
    nested_path,
    run_refused,
    stale_generation,
)
from ckptlog.processor.core.retention import Preservation, apply_retention, preservation
from ckptlog.processor.core.scoring import Score, score
from ckptlog.processor.core.state import CheckpointRecord, FoldSettings, RunState, implicit_root, new_run, root_prefix

_NEG_INF = -math.inf
# what a refused run may still receive: a corrected start, settlements (and a stale root fact: a no-op)
_ALWAYS = (RunStarted, DeletionCompleted, RootRefused)
# what a finished run still takes
_AFTER_FINISH = (DeletionCompleted, RunFinished, RunForgotten, RunReopened, RootRefused)
_TO_RETIRED = (RunForgotten, RunReopened)  # what a retired run's handler still sees (its kept state may change)
_new = tuple.__new__  # builds Output/Deletion tuples without their Python-level __new__
# the hot path's output names, read once from the output table (ckptlog/events/outputs.py)
_REGISTERED, _REQUESTED = CHECKPOINT_REGISTERED.name, VALIDATION_REQUESTED.name
_CHANGED = CHECKPOINT_STATUS_CHANGED.name


class Fold:
    """All runs of one input partition.

    `emit=False` skips building output events (`Effects.outputs` stays empty) for callers
    that only want the state, views and deletions — `ckptlog fold`, `ckptlog replay`.
    State and deletions are the same either way (tests/unit/core/test_fold_properties.py);
    a fifth of the fold's cost per report is building outputs.
    """

    def __init__(
        self,
        settings: FoldSettings | None = None,
        runs: dict[str, RunState] | None = None,
        *,
        emit: bool = True,
        refused: dict[str, str] | None = None,
        root_history: bool = False,
        finished: dict[str, str] | None = None,
        symlinked: dict[str, str] | None = None,
        retired: dict[str, bytes] | None = None,
        track_changes: bool = False,
    ) -> None:
        self.settings = settings or FoldSettings()
        self.emit = emit
        # reports and validation results put DEFERRED_MARK in their watermark's place (core/outputs.py): for the
        # batch folder, which builds one watermark per run per batch (service/batch.py sets it)
        self.defer_marks = False
        # incremental snapshots (core/delta.py): the run ids whose run, refused or finished entry may have
        # changed since the last snapshot (None: not tracked), and who to tell before an event changes a run
        self.changed: dict[str, None] | None = {} if track_changes else None
        self.watch: Callable[[str], None] | None = None
        self.runs: dict[str, RunState] = runs if runs is not None else {}
        self.refused: dict[str, str] = refused if refused is not None else {}  # run id -> why its run_started was
        self.roots = lifecycle.Roots(self.runs.values(), history=root_history)  # every run's root: none may nest
        # finished runs that left the hot state: run id -> their root ('' without one), still registered
        self.finished: dict[str, str] = finished if finished is not None else {}
        for run_id in list(islice(self.finished, max(0, len(self.finished) - self.settings.finished_runs_kept))):
            del self.finished[run_id]  # a schema 4 snapshot's table, which had no bound: the newest records stay
            if self.changed is not None:
                self.changed[run_id] = None
        # the states of retired runs whose record is kept, for a reopen (contract §3 "Reopened runs"), encoded
        # (snapshot.retired_state), in the order of `finished`; none for a run forgotten or retired under a build
        # that kept none (schema <= 5)
        self.retired: dict[str, bytes] = retired if retired is not None else {}
        for run_id in [r for r in self.retired if r not in self.finished]:
            del self.retired[run_id]
            if self.changed is not None:
                self.changed[run_id] = None
        # run_finished and run_forgotten events folded: a bound of the runs retired (and so of the records
        # expired), which tells a split fold (ckptlog/processor/foldfile.py) whether expiry could have mattered
        self.finishes = 0
        for run_id, root in self.finished.items():
            if root:
                self.roots.add(root, run_id)
        # runs refused because their root is reached through a symlink: run id -> their root, still
        # registered (contract §9 *Roots behind a symlink*; ckptlog/processor/core/linked_roots.py)
        self.symlinked: dict[str, str] = symlinked if symlinked is not None else {}
        for run_id, root in self.symlinked.items():
            self.roots.add(root, run_id)
        self.leaving: dict[str, RunState] = {}  # runs the last `apply` retired: for publishing their final VIEW
        self.reopening: dict[str, RunState] = {}  # runs the last `apply` brought back from `retired`
        self.journal = undo.Journal()
        self._window = self.settings.dedup_window
        self._handlers = {kind.struct: self.handler(kind.handler) for kind in INPUT_KINDS}

    def handler(self, name: str) -> Callable[[Any, RunState | None], Effects]:
        """The handler an input kind's row names (ckptlog/events/decoded.py `INPUT_KINDS`): `_report` is this
        fold's method, `lifecycle.restart` the function of ckptlog/processor/core/lifecycle.py (the rare
        events live there), called with this fold. An unknown name is an AttributeError at once."""
        module, _, function = name.rpartition(".")
        if not module:
            method: Callable[[Any, RunState | None], Effects] = getattr(self, function)
            return method
        if module != "lifecycle":
            raise ValueError(f"handler {name!r}: a Fold method or a function of ckptlog/processor/core/lifecycle.py")
        return partial(getattr(lifecycle, function), self)

    def apply(self, event: DecodedEvent) -> Effects:
        subject, runs, journal = event.subject, self.runs, self.journal
        run = runs.get(subject)
        journal.begin(run)  # first: an apply that returns early leaves nothing for `rollback_last` to undo
        if self.leaving:
            self.leaving.clear()
        if self.reopening:
            self.reopening.clear()
        if run is None:
            if self.finished and subject in self.finished and event.__class__ not in _TO_RETIRED:
                return finishing.after_retired(subject, event)
            if self.symlinked and subject in self.symlinked:
                return linked_roots.after_symlinked(subject, self.symlinked[subject], event)
        elif run.seen.known(event.id, subject):
            return DUPLICATE
        elif run.finished is not None and event.__class__ not in _AFTER_FINISH:
            return rejected(finishing.finished_rejection(subject, event.type))
        if self.refused and subject in self.refused and event.__class__ not in _ALWAYS:
            return rejected(run_refused(subject, self.refused[subject]))
        if self.changed is not None:  # everything below may change the subject's entries (and only theirs)
            self.changed[subject] = None
        if self.watch is not None:
            self.watch(subject)
        try:
            effects = self._handlers[type(event)](event, run)
            if effects.rejection is None:
                run = runs.get(subject)  # the handler may have created or replaced it
                # remember the id (contract §3 "Deduplication"); a completion naming its evictions needs not
                if run is not None and (event.__class__ is not DeletionCompleted or not lifecycle.idempotent(event)):
                    run.seen.remember(event.id, subject, self._window, journal.push)
        except Exception as exc:  # any fault while applying one record: all or nothing (contract §7)
            journal.rollback()
            return rejected(internal_error(subject, event.type, exc))
        if effects.outputs and effects.rejection is None and not self.emit:  # the rare events build theirs anyway
            return _new(Effects, ((), effects.deletions, None, False))
        return effects

    def rollback_last(self) -> None:
        """Undo the last `apply` (its journal is kept until the next one; empty when that apply
        returned before changing anything): for a caller whose own work on the event's effects
        failed, so the event is all or nothing end to end."""
        self.journal.rollback()
        self.journal.begin(None)

    def owed(self) -> list[Deletion]:
        """Every eviction whose deletion is not settled yet, per run in eviction order: what a
        restore re-drives and `ckptlog fold --apply` deletes (contract §9: never a live path)."""
        return [
            Deletion(run.run_id, evicted.path, run.storage_root or "", evicted.eviction)
            for run in self.runs.values()
            for evicted in run.owed_evictions()
        ]

    def run_of(self, run_id: str) -> RunState:
        """The run, created from the processor defaults when it has no state yet (the caller has
        checked `lifecycle.implicit_problem`); its root is registered with every other run's."""
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = new_run(run_id, self.settings)
            self.journal.push((undo.RUN, self.runs, run_id, None))
            if run.storage_root is not None:
                self.journal.push((undo.CALL, self.roots.remove, run.root))
                self.roots.add(run.root, run_id)
        return run

    # -- report --------------------------------------------------------------------

    def _report(self, event: Report, run: RunState | None) -> Effects:
        data, run_id = event.data, event.subject
        generation, checkpoint = data.generation, data.checkpoint
        if run is not None and generation is not None and generation < run.generation:
            return rejected(stale_generation(run_id, generation, run.generation))
        if run is None and (problem := lifecycle.implicit_problem(self, run_id)) is not None:
            return rejected(problem)
        if checkpoint is None:
            if data.validation is not False:
                return rejected(validation_without_checkpoint(run_id))
            run = run or self.run_of(run_id)
            outputs = [] if generation is None else lifecycle.implicit_restart(self, run, generation)
            run.report_count += 1
            run.index_in_generation += 1
            if self.emit:
                outputs.append(DEFERRED_MARK if self.defer_marks else watermark(run))
            return _new(Effects, (outputs, (), None, False))
        path = checkpoint.path
        if run is not None and run.is_own_key(path) and run.nested(path) is None:
            key = path  # already canonical, inside the root, not live, nesting with nothing: the common case
        else:
            checked = self._check_checkpoint(run, run_id, path)
            if isinstance(checked, Rejection):
                return rejected(checked)
            key, run = checked, run or self.run_of(run_id)
        # no generation (the common report): no restart to check, no call
        outputs = [] if generation is None else lifecycle.implicit_restart(self, run, generation)
        report_index = run.report_count
        run.report_count = report_index + 1
        run.index_in_generation += 1
        kept = None if run.preserving is False else preservation(run, path, data.metrics, report_index, event.time)
        return self._register(run, path, key, data.metrics, report_index, data.validation, outputs, kept)

    def _check_checkpoint(self, run: RunState | None, run_id: str, path: str) -> str | Rejection:
        root = run.storage_root if run is not None else implicit_root(self.settings, run_id)
        prefix = run.root_prefix if run is not None else root_prefix(root)
        key = checkpoint_key(run_id, path, root, prefix, run is not None and bool(run.is_own_key(path)))
        if run is None or isinstance(key, Rejection):
            return key
        if run.is_live(key):
            return duplicate_path(run_id, path)
        other = run.nested(key)
        if other is not None:
            return nested_path(run_id, path, run.outstanding[other].path if other in run.outstanding else other)
        return key

    def _register(
        self,
        run: RunState,
        path: str,
        key: str,
        metrics: dict[str, Any],
        report_index: int,
        validation: bool | ValidationSpec,
        outputs: list[Output],
        kept: Preservation | None,
    ) -> Effects:
        attribute = run.score_attribute
        value: Score  # not the float `_NEG_INF` is: the compiled fold would make a score a double (scoring.py)
        if attribute is None:
            has, value, problem = False, _NEG_INF, None
        else:
            has, value, problem = score(metrics, attribute, run.config.checkpoint_score_order)
        spec = None if validation is False else run.default_validation if validation is True else validation
        status = "PENDING_VALIDATION" if spec is not None else "COMMITTED"
        record = CheckpointRecord(path, key, metrics, report_index, status, spec, (has, value, report_index))
        if kept is not None:  # retention beyond Ray (the journal saved the rules' state and the count)
            record.preserved, run.rule_state = kept.label, kept.rule_state
            run.preserved_count += kept.label is not None
            outputs.extend(warning(code, message, path) for code, message in kept.problems)
        push = self.journal.push
        push((undo.ADDED, record))
        size = run.checkpoints.add(record)
        push((undo.NEW, run.by_key, key))
        run.by_key[key] = record
        run.nesting.add(key)
        run.latest = record
        if spec is not None:
            push((undo.NEW, run.pending, key))
            run.pending[key] = record
        if not self.emit:
            return self._retain(run, outputs, size)
        outputs.append(_new(Output, (_REGISTERED, _registered(record))))
        if spec is not None:
            requested = {
                "checkpoint_path": path,
                "report_index": report_index,
                "fn_kwargs": spec.fn_kwargs,
                "timeout_s": spec.timeout_s,
            }
            outputs.append(_new(Output, (_REQUESTED, requested)))
        if problem is not None and spec is None:  # pending: its validation result may bring the score
            outputs.append(score_warning(run, path, problem))
        return self._retain(run, outputs, size)

    def _retain(self, run: RunState, outputs: list[Output], size: int) -> Effects:
        keep = run.keep
        emit = self.emit
        size -= run.preserved_count  # preserved checkpoints do not count against num_to_keep
        if keep is None or size <= keep:
            if emit:
                outputs.append(DEFERRED_MARK if self.defer_marks else watermark(run))
            return _new(Effects, (outputs, (), None, False))
        deletions = []
        run_id, root = run.run_id, run.storage_root or ""
        retained = apply_retention(run, size - keep, self.journal.push)
        for record, eviction, rank in retained.evicted:
            path = record.path
            if emit:
                outputs.append(evicted(run, record, rank, retained.worst_kept, "num_to_keep", keep))
            deletions.append(_new(Deletion, (run_id, path, root, eviction)))
        if emit:
            outputs.append(DEFERRED_MARK if self.defer_marks else watermark(run))
        return _new(Effects, (outputs, deletions, None, False))

    # -- validation_result ---------------------------------------------------------

    def _validation_result(self, event: ValidationResult, run: RunState | None) -> Effects:
        data = event.data
        key = data.checkpoint_path
        if run is None or not run.is_own_key(key):  # already canonical below the root: its own key
            try:
                key = normalize(key)
            except UnsafePath:
                key = ""
        record = run.pending.get(key) if run is not None else None
        if run is None or record is None:
            return Effects([not_pending(event.subject, data.checkpoint_path)])
        push = self.journal.push
        push((undo.OLD, run.pending, key, record))
        del run.pending[key]
        previous = record.status
        if data.status == "VALIDATED":
            self._validated(run, record, data.metrics)
        else:
            push((undo.FIELDS, record, record.status, record.metrics, record.sort_key))
            record.status = data.status
        if not self.emit:  # `ckptlog fold`, replays: no output to build
            return self._retain(run, [], len(run.checkpoints))
        changed = {
            "checkpoint_path": record.path,
            "report_index": record.report_index,
            "status": record.status,
            "previous_status": previous,
            "metrics": record.metrics,
        }
        if data.error is not None:
            changed["error"] = data.error
        outputs = [_new(Output, (_CHANGED, changed))]
        cfg = run.config
        if cfg.checkpoint_score_attribute is not None:  # the registration left the warning to us
            problem = score(record.metrics, cfg.checkpoint_score_attribute, cfg.checkpoint_score_order)[2]
            if problem is not None:
                outputs.append(score_warning(run, record.path, problem))
        return self._retain(run, outputs, len(run.checkpoints))

    def _validated(self, run: RunState, record: CheckpointRecord, metrics: dict[str, Any]) -> None:
        """A VALIDATED result: the record takes the result's metrics over its own and is re-sorted."""
        cfg, push = run.config, self.journal.push
        merged = {**record.metrics, **metrics}
        has, value, _ = score(merged, cfg.checkpoint_score_attribute, cfg.checkpoint_score_order)
        push((undo.DROPPED, record))
        run.checkpoints.remove(record)
        push((undo.FIELDS, record, record.status, record.metrics, record.sort_key))
        record.status, record.metrics, record.sort_key = "VALIDATED", merged, (has, value, record.report_index)
        push((undo.ADDED, record))
        run.checkpoints.add(record)


def _registered(record: CheckpointRecord) -> dict[str, Any]:
    data = {
        "checkpoint_path": record.path,
        "report_index": record.report_index,
        "metrics": record.metrics,
        "status": record.status,
    }
    if record.preserved is not None:  # contract §5: the rule that preserved it (absent on others)
        data["preserved"] = record.preserved
    return data
