"""What one applied event produces: output events, deletions to perform, or a rejection.

Every output's name comes from its row in the output table (ckptlog/events/outputs.py `OUTPUT_KINDS`),
which also holds the model its data must validate against (the property tests and the corpus
test check every output the fold emits there: tests/unit/core/published.py), its topic and its
version.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ckptlog.events.outputs import CHECKPOINT_EVICTED, WARNING, WATERMARK, OutputKind
from ckptlog.events.rejections import Rejection

if TYPE_CHECKING:
    from ckptlog.processor.core.scoring import Score
    from ckptlog.processor.core.state import CheckpointRecord, RunState


class Output(NamedTuple):
    """One output event before its envelope: `type` is the short name (`watermark`), an
    `OutputKind.name` of the output table.

    A tuple, not a dataclass: the fold makes two or three per event, and building a
    tuple is several times cheaper than a frozen dataclass.
    """

    type: str
    data: dict[str, Any]


class Deletion(NamedTuple):
    """An evicted path to delete once the eviction is durable, confined to `root`; `eviction`
    numbers the run's evictions (the completion names it)."""

    run_id: str
    path: str
    root: str
    eviction: int


class Effects(NamedTuple):
    """What one event did. A tuple so the fold builds one per event cheaply; never mutated."""

    outputs: Sequence[Output] = ()
    deletions: Sequence[Deletion] = ()
    rejection: Rejection | None = None
    duplicate: bool = False


NOTHING = Effects()
DUPLICATE = Effects(duplicate=True)


def rejected(rejection: Rejection) -> Effects:
    return Effects(rejection=rejection)


def output(kind: OutputKind, data: dict[str, Any]) -> Output:
    """An output of `kind` (a row of the output table): how the rare outputs are built."""
    return Output(kind.name, data)


# -- outputs the fold builds in more than one place --------------------------------------

_new = tuple.__new__  # one per report and per eviction: without the NamedTuple's Python-level __new__
_WATERMARK, _EVICTED = WATERMARK.name, CHECKPOINT_EVICTED.name


def watermark(run: RunState) -> Output:
    """contract §4: the run's watermarks after a change (`validated` read from the run)."""
    data = {
        "committed": run.report_count,
        "validated": run.validated,
        "generation": run.generation,
        "index_in_generation": run.index_in_generation,
    }
    return _new(Output, (_WATERMARK, data))


DEFERRED_MARK: Output = _new(Output, (_WATERMARK, {}))
"""The watermark of a report or validation result in a fold whose marks are deferred (`Fold.defer_marks`,
set by the batch folder, service/batch.py): a placeholder in the watermark's place (last, contract §4),
built from the run once per run per batch (`BatchFolder.seal`) instead of once per event and dropped
by the batch's coalescing. That gives the same values because every change of a watermark's four
fields (`report_count`, `validated`: the run's pending records, `generation`, `index_in_generation`)
emits a watermark in the same event: a later event of the batch that changes one of them replaces
the run's placeholder with its own (tests/unit/service/test_watermarks.py holds the two equal). Never
mutated, never published."""


_NOT_EXEMPT = ["not_latest", "not_pending", "not_preserved"]


def evicted(
    run: RunState, record: CheckpointRecord, rank: int, worst_kept: CheckpointRecord | None, rule: str, keep: int
) -> Output:
    """contract §5: a `checkpoint_evicted` with its reason. Built only when a checkpoint is evicted:
    the rule (`num_to_keep`, or a finished run's `best`), the order it ranked by, its rank then,
    its score and that of the worst checkpoint the rule keeps (null without a score)."""
    scored = run.score_attribute is not None
    maximise = run.config.checkpoint_score_order == "max"
    reason = {
        "rule": rule,
        "order": "score" if scored else "report",
        "rank": rank,
        "num_to_keep": keep,
        "score": _score(record, scored, maximise),
        "worst_kept_score": None if worst_kept is None else _score(worst_kept, scored, maximise),
        "not_exempt": list(_NOT_EXEMPT),  # neither the latest, nor pending, nor preserved: what §9 exempts
    }
    data = {"checkpoint_path": record.path, "report_index": record.report_index, "reason": reason}
    return _new(Output, (_EVICTED, data))


def _score(record: CheckpointRecord, scored: bool, maximise: bool) -> Score | None:
    """The record's score as reported (the sort key holds it signed by the order), or None."""
    has, value, _ = record.sort_key
    if not has or not scored:
        return None
    return value if maximise else -value


def warning(code: str, message: str, checkpoint_path: str | None = None) -> Output:
    data: dict[str, Any] = {"code": code, "message": message}
    if checkpoint_path is not None:
        data["checkpoint_path"] = checkpoint_path
    return Output(WARNING.name, data)


def deletion_refused(run_id: str, path: str, reason: str) -> Output:
    """An eviction settled without a deletion (contract §9): the path stays in storage."""
    message = (
        f"run {run_id!r}: evicted checkpoint {path!r} was not deleted: {reason}; "
        "it stays in storage — remove it by hand once you know why"
    )
    return warning("deletion_refused", message, path)


def not_pending(run_id: str, path: str) -> Output:
    """A validation result for a checkpoint that is not pending: Ray logs a warning and ignores it."""
    return warning(
        "not_pending", f"run {run_id!r}: validation result for {path!r}, which is not pending; ignored", path
    )


_SCORE_PROBLEMS = {
    "score_missing": "has no metric",
    "score_not_numeric": "has a non-numeric",
    "score_nan": "has NaN for",
}


def score_warning(run: RunState, path: str, problem: str) -> Output:
    attr = run.config.checkpoint_score_attribute
    why = _SCORE_PROBLEMS[problem]
    return warning(
        problem, f"run {run.run_id!r}: checkpoint {path!r} {why} {attr!r}; it ranks last under the score order", path
    )
