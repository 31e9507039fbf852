"""The fold: a deterministic state machine over input events (SPEC §3–4).

`Fold.apply(event)` mutates only the run states it owns and returns `Effects`. No I/O,
no clock, no randomness: the same log always yields the same states and outputs, which
is what makes snapshot + replay equal an uninterrupted run. Rejections are decided before
anything is mutated, so a rejected event leaves the state untouched. This is the one fold:
the processor, `ckptlog replay` and `ckptlog fold` all run it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from events.decoded import (
    DecodedEvent,
    DeletionCompleted,
    Report,
    RunStarted,
    ValidationResult,
    ValidationSpec,
    WorkerGroupRestart,
)
from events.rejections import Rejection
from processor.core.outputs import DUPLICATE, NOTHING, Deletion, Effects, Output, rejected
from processor.core.paths import UnsafePath, normalize
from processor.core.rejections import check_root, checkpoint_key, conflict, duplicate_path, stale_generation
from processor.core.retention import apply_retention
from processor.core.scoring import score
from processor.core.state import CheckpointRecord, FoldSettings, RunState, new_run, root_prefix

_NEG_INF = -math.inf
_new = tuple.__new__  # builds Output/Deletion tuples without their Python-level __new__


class Fold:
    """All runs of one input partition.

    `emit=False` skips building output events (`Effects.outputs` stays empty) for callers
    that only want the state, views and deletions — `ckptlog fold`, `ckptlog replay`.
    State and deletions are the same either way (tests/unit/core/test_fold_properties.py);
    a fifth of the fold's cost per report is building outputs.
    """

    def __init__(
        self, settings: FoldSettings | None = None, runs: dict[str, RunState] | None = None, *, emit: bool = True
    ) -> None:
        self.settings = settings or FoldSettings()
        self.emit = emit
        self.runs: dict[str, RunState] = runs if runs is not None else {}
        self._window = self.settings.dedup_window
        self._handlers: dict[type, Callable[[Any, RunState | None], Effects]] = {
            Report: self._report,
            RunStarted: self._run_started,
            ValidationResult: self._validation_result,
            WorkerGroupRestart: self._restart,
            DeletionCompleted: self._deletion_completed,
        }

    def apply(self, event: DecodedEvent) -> Effects:
        subject, runs = event.subject, self.runs
        run = runs.get(subject)
        if run is not None and event.id in run.seen_set:
            return DUPLICATE
        effects = self._handlers[type(event)](event, run)
        if effects.rejection is None:
            run = runs.get(subject)  # the handler may have created or replaced it
            if run is not None:  # remember the id in the run's bounded dedup window
                seen, event_id = run.seen, event.id
                seen.append(event_id)
                run.seen_set.add(event_id)
                while len(seen) > self._window:
                    run.seen_set.discard(seen.popleft())
            if effects.outputs and not self.emit:  # the rare events build theirs anyway
                return _new(Effects, ((), effects.deletions, None, False))
        return effects

    def _run(self, run_id: str) -> RunState:
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = new_run(run_id, self.settings)
        return run

    # -- run_started ---------------------------------------------------------------

    def _run_started(self, event: RunStarted, run: RunState | None) -> Effects:
        data = event.data
        problem = check_root(event.subject, data.storage_path, self.settings.outer_root)
        if problem is not None:
            return rejected(problem)
        if run is not None and run.started == data:
            return NOTHING  # identical repeat: a no-op (SPEC §2)
        if run is not None and (run.started is not None or run.latest is not None or run.outstanding):
            return rejected(conflict(run.run_id, run.started is not None))
        fresh = new_run(event.subject, self.settings, data)
        if run is not None:  # implicitly created by metric-only reports or a restart
            fresh.report_count, fresh.generation = run.report_count, run.generation
            fresh.index_in_generation = run.index_in_generation
            fresh.seen, fresh.seen_set = run.seen, run.seen_set
        self.runs[event.subject] = fresh
        return Effects([_watermark(fresh)])

    # -- report --------------------------------------------------------------------

    def _report(self, event: Report, run: RunState | None) -> Effects:
        data, run_id = event.data, event.subject
        generation, checkpoint = data.generation, data.checkpoint
        if run is not None and generation is not None and generation < run.generation:
            return rejected(stale_generation(run_id, generation, run.generation))
        if checkpoint is None:
            run = run or self._run(run_id)
            run.report_count += 1
            run.index_in_generation += 1
            return _new(Effects, ([_watermark(run)], (), None, False))
        path = checkpoint.path
        if run is not None and run.is_own_key(path) and path not in run.by_key and path not in run.outstanding:
            key = path  # already canonical, inside the root and new: the common case, checked cheaply
        else:
            checked = self._check_checkpoint(run, run_id, path)
            if isinstance(checked, Rejection):
                return rejected(checked)
            key, run = checked, run or self._run(run_id)
        report_index = run.report_count
        run.report_count = report_index + 1
        run.index_in_generation += 1
        return self._register(run, path, key, data.metrics, report_index, data.validation)

    def _check_checkpoint(self, run: RunState | None, run_id: str, path: str) -> str | Rejection:
        root = run.storage_root if run is not None else self.settings.default_root
        prefix = run.root_prefix if run is not None else root_prefix(root)
        key = checkpoint_key(run_id, path, root, prefix, run is not None and bool(run.is_own_key(path)))
        if run is not None and isinstance(key, str) and (key in run.by_key or key in run.outstanding):
            return duplicate_path(run_id, path)
        return key

    def _register(
        self,
        run: RunState,
        path: str,
        key: str,
        metrics: dict[str, Any],
        report_index: int,
        validation: bool | ValidationSpec,
    ) -> Effects:
        attribute = run.score_attribute
        if attribute is None:
            has, value, problem = False, _NEG_INF, None
        else:
            has, value, problem = score(metrics, attribute, run.config.checkpoint_score_order)
        spec = None if validation is False else run.default_validation if validation is True else validation
        status = "PENDING_VALIDATION" if spec is not None else "COMMITTED"
        record = CheckpointRecord(path, key, metrics, report_index, status, spec, (has, value, report_index))
        size = run.checkpoints.add(record)
        run.by_key[key] = record
        run.latest = record
        if spec is not None:
            run.pending[key] = record
        if not self.emit:
            return self._retain(run, [], size)
        outputs = [
            _new(
                Output,
                (
                    "checkpoint_registered",
                    {"checkpoint_path": path, "report_index": report_index, "metrics": metrics, "status": status},
                ),
            )
        ]
        if spec is not None:
            outputs.append(
                _new(
                    Output,
                    (
                        "validation_requested",
                        {
                            "checkpoint_path": path,
                            "report_index": report_index,
                            "fn_kwargs": spec.fn_kwargs,
                            "timeout_s": spec.timeout_s,
                        },
                    ),
                )
            )
        if problem is not None:
            outputs.append(_score_warning(run, path, problem))
        return self._retain(run, outputs, size)

    def _retain(self, run: RunState, outputs: list[Output], size: int) -> Effects:
        keep = run.keep
        emit = self.emit
        if keep is None or size <= keep:
            if emit:
                outputs.append(_watermark(run))
            return _new(Effects, (outputs, (), None, False))
        deletions = []
        run_id, root = run.run_id, run.storage_root or ""
        for record in apply_retention(run, size - keep):
            path = record.path
            if emit:
                outputs.append(
                    _new(Output, ("checkpoint_evicted", {"checkpoint_path": path, "report_index": record.report_index}))
                )
            deletions.append(_new(Deletion, (run_id, path, root)))
        if emit:
            outputs.append(_watermark(run))
        return _new(Effects, (outputs, deletions, None, False))

    # -- validation_result ---------------------------------------------------------

    def _validation_result(self, event: ValidationResult, run: RunState | None) -> Effects:
        data = event.data
        try:
            key = normalize(data.checkpoint_path)
        except UnsafePath:
            key = ""
        record = run.pending.get(key) if run is not None else None
        if run is None or record is None:
            return Effects(
                [
                    Output(
                        "warning",
                        {
                            "code": "not_pending",
                            "checkpoint_path": data.checkpoint_path,
                            "message": f"run {event.subject!r}: validation result for "
                            f"{data.checkpoint_path!r}, which is not pending; ignored",
                        },
                    )
                ]
            )
        del run.pending[key]
        previous, record.status = record.status, data.status
        if data.status == "VALIDATED":
            run.checkpoints.remove(record)
            record.metrics = {**record.metrics, **data.metrics}
            cfg = run.config
            has, value, _ = score(record.metrics, cfg.checkpoint_score_attribute, cfg.checkpoint_score_order)
            record.sort_key = (has, value, record.report_index)
            run.checkpoints.add(record)
        changed = {
            "checkpoint_path": record.path,
            "report_index": record.report_index,
            "status": record.status,
            "previous_status": previous,
            "metrics": record.metrics,
        }
        if data.error is not None:
            changed["error"] = data.error
        return self._retain(run, [Output("checkpoint_status_changed", changed)], len(run.checkpoints))

    # -- worker_group_restart / deletion_completed ---------------------------------

    def _restart(self, event: WorkerGroupRestart, run: RunState | None) -> Effects:
        run = run or self._run(event.subject)
        run.generation += 1
        run.index_in_generation = 0
        started = {
            "generation": run.generation,
            "report_count": run.report_count,
            "latest_checkpoint_path": run.latest.path if run.latest else None,
            "num_workers": event.data.num_workers,
        }
        return Effects([Output("worker_group_started", started), _watermark(run)])

    def _deletion_completed(self, event: DeletionCompleted, run: RunState | None) -> Effects:
        if run is None:
            return NOTHING
        outstanding, own_key, deleted = run.outstanding, run.is_own_key, []
        for path in event.data.checkpoint_paths:
            try:
                key = path if own_key(path) else normalize(path)  # the processor writes the canonical spelling
            except UnsafePath:
                continue
            if key in outstanding:  # else already recorded (a retried completion): harmless
                del outstanding[key]
                deleted.append(path)
        return Effects([Output("checkpoints_deleted", {"checkpoint_paths": deleted})]) if deleted else NOTHING


def _watermark(run: RunState) -> Output:
    return _new(
        Output,
        (
            "watermark",
            {
                "committed": run.report_count,
                "validated": run.validated,
                "generation": run.generation,
                "index_in_generation": run.index_in_generation,
            },
        ),
    )


def _score_warning(run: RunState, path: str, problem: str) -> Output:
    attr = run.config.checkpoint_score_attribute
    why = {"score_missing": "has no metric", "score_not_numeric": "has a non-numeric", "score_nan": "has NaN for"}[
        problem
    ]
    return Output(
        "warning",
        {
            "code": problem,
            "checkpoint_path": path,
            "message": f"run {run.run_id!r}: checkpoint {path!r} {why} {attr!r}; it ranks last under the score order",
        },
    )
