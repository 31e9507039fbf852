"""The run VIEW (contract §4): a run's kept checkpoints, latest, best and watermarks.

One shape for every place a view appears: the processor publishes it on the compacted state
topic, `ckptlog fold` and `ckptlog inspect` print it per run, and readers (ckptlog.AsyncReader)
parse it into this model. The fold builds views as plain dicts (ckptlog/processor/core/view.py: it
does so after every change, and a model per view would cost more than the fold); this model
is their contract. schemas/view.schema.json is generated from it, and tests check that every
view the fold builds, and every view in the golden `ckptlog fold` documents, validates.

Unknown keys are ignored, so readers keep working when a newer processor adds one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from ckptlog.events.models import Status
from ckptlog.events.retention_rules import RULES
from ckptlog.events.rule_types import Preserved

Consistency = Literal["committed", "validated"]
CONSISTENCIES: tuple[Consistency, ...] = ("committed", "validated")
_VIEW = ConfigDict(extra="ignore", frozen=True, ser_json_inf_nan="constants")  # NaN stays NaN, as the topic holds it


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def _preserved_description() -> str:
    """The `preserved` key's description, from the rule table (ckptlog/events/retention_rules.py)."""
    labels = ", ".join(f"`{rule.label}`: {rule.fields[0].name}" for rule in RULES)
    first = f"`{RULES[0].label}` when both" if len(RULES) == 2 else "the first of them when several"
    return (
        f"Kept for good by a retention rule beyond Ray ({labels}; {first}): exempt from eviction. "
        "Absent on other checkpoints."
    )


class ReportedCheckpoint(BaseModel):
    """Ray's `ReportedCheckpoint`: a kept checkpoint with its metrics (plus status and index)."""

    model_config = _VIEW
    path: str
    metrics: dict[str, Any] = Field(description="As reported, merged with the metrics of a VALIDATED result.")
    status: Status
    report_index: int = Field(description="0-based position of its report in the run's log.")
    preserved: Preserved | SkipJsonSchema[None] = Field(
        default=None,
        exclude_if=lambda value: value is None,
        json_schema_extra=_no_default,
        description=_preserved_description(),
    )


def _optional() -> Any:
    """A key absent unless set (never null in a dump or the schema)."""
    return Field(default=None, exclude_if=lambda v: v is None, json_schema_extra=_no_default)


class ViewConfig(BaseModel):
    """A VIEW's `checkpoint_config`: run_started's, with the beyond-Ray keys only when set."""

    model_config = _VIEW
    num_to_keep: int | None = Field(description="Kept by score (null: every checkpoint).")
    checkpoint_score_attribute: str | None = Field(description="The score metric (null: report order).")
    checkpoint_score_order: Literal["max", "min"]
    # fmt: off
    # --- generated from ckptlog/events/retention_rules.py by python -m ckptlog.events.rule_codegen ---
    keep_every_n_steps: int | SkipJsonSchema[None] = _optional()
    step_attribute: str | SkipJsonSchema[None] = _optional()
    keep_time_interval_s: float | SkipJsonSchema[None] = _optional()
    # --- end of generated code ---
    # fmt: on


class RunView(BaseModel):
    """Value of the state topic (key = run id) and of `ckptlog fold` per run."""

    model_config = _VIEW
    checkpoints: list[ReportedCheckpoint] = Field(description="Kept checkpoints in sort order, best last.")
    latest: str | None = Field(description="Path of the newest registered checkpoint.")
    best: str | None = Field(description="Path of the last kept checkpoint (the best one).")
    committed: int = Field(description="Committed watermark: the number of reports.")
    validated: int = Field(description="Validated watermark: the smallest pending report index, else `committed`.")
    generation: int = Field(description="Current worker-group generation: 0 until the first restart.")
    index_in_generation: int = Field(description="Reports since the current generation started.")
    checkpoint_config: ViewConfig | SkipJsonSchema[None] = Field(
        default=None,
        exclude_if=lambda value: value is None,
        json_schema_extra=_no_default,
        description="The run's retention as the fold applies it (its run_started's checkpoint_config, else the "
        "processor's defaults): how many are kept and by which score. Absent on VIEWs of processors before it.",
    )
    finished: Literal[True] | SkipJsonSchema[None] = Field(
        default=None,
        exclude_if=lambda value: value is None,
        json_schema_extra=_no_default,
        description="Present (true) on a finished run's final VIEW (run_finished, contract §3): no report "
        "changes it any more, unless the run is reopened. Absent while the run goes on.",
    )
    reopened: Annotated[int, Field(ge=1)] | SkipJsonSchema[None] = Field(
        default=None,
        exclude_if=lambda value: value is None,
        json_schema_extra=_no_default,
        description="How many times the run was reopened after a finish (run_reopened, contract §3): the "
        "run's epoch, which clients name its next finish and reopen by. Absent until its first reopen.",
    )
    evicted: list[str] | SkipJsonSchema[None] = Field(
        default=None,
        exclude=True,  # dumps are the state topic's shape, which has no `evicted`
        json_schema_extra=_no_default,  # absent, never null: the schema says only "array, optional"
        description="`ckptlog fold` only: paths evicted by retention while folding the file, in "
        "eviction order. Absent on the state topic.",
    )

    pages: ViewPages | SkipJsonSchema[None] = Field(
        default=None,
        exclude=True,
        json_schema_extra=_no_default,
        description="State topic only, for a run keeping many checkpoints: `checkpoints` is then empty "
        "here and its kept checkpoints are in page records (ViewPage); readers assemble them.",
    )

    def watermark(self, consistency: Consistency) -> int:
        return self.committed if consistency == "committed" else self.validated

    def reached(self, report_index: int, consistency: Consistency) -> bool:
        """Ray's get_all_reported_checkpoints predicate, generalised: watermark >= report_index."""
        return self.watermark(consistency) >= report_index

    def newer_than(self, other: RunView | None) -> bool:
        """False for a VIEW that moves a watermark backwards (an at-least-once replay repeating an
        older VIEW): readers keep the newer one they already have."""
        return other is None or (self.committed >= other.committed and self.validated >= other.validated)


# -- bounded views (contract §7): a run that keeps many checkpoints is published as a head and pages --


PAGE_KEY_SEPARATOR = "\x1f"
"""Separates a run id from its page coordinates in a page record's key: run ids never hold
control characters (contract §2), so no run id can be mistaken for a page key."""


class ViewPages(BaseModel):
    """On a head whose checkpoints live in page records: each page holds the kept checkpoints
    whose report index lies in [page * span, (page + 1) * span)."""

    model_config = _VIEW
    span: int = Field(description="Report indices per page.")


class PageEntry(ReportedCheckpoint):
    """A kept checkpoint in a page, with the value it sorts by."""

    sort: Any = Field(
        description="Its score as the fold orders by it (negated under `min`; a JSON number, "
        "±Infinity included), or null when it has none: those rank below every score."
    )


class ViewPage(BaseModel):
    """A state-topic record keyed `{run}\\x1fpage\\x1f{page}\\x1f{part}`: one part of one page of a
    run's kept checkpoints, in report order. A page too large for one record is split in parts,
    part 0 written last and naming how many there are; a page with nothing kept is a tombstone."""

    model_config = _VIEW
    run: str
    page: int
    part: int
    parts: int
    checkpoints: list[PageEntry]


def page_key(run_id: str, page: int, part: int) -> str:
    sep = PAGE_KEY_SEPARATOR
    return f"{run_id}{sep}page{sep}{page}{sep}{part}"


def parse_page_key(key: str) -> tuple[str, int, int] | None:
    """(run id, page, part) of a page record's key; None for a head's key (a run id) — and for a key
    that only looks like a page key (its numbers are not decimal, or absurdly long)."""
    pieces = key.split(PAGE_KEY_SEPARATOR)
    if len(pieces) != 4 or pieces[1] != "page" or not _number(pieces[2]) or not _number(pieces[3]):
        return None
    return pieces[0], int(pieces[2]), int(pieces[3])


def _number(text: str) -> bool:
    return 0 < len(text) <= 18 and text.isascii() and text.isdigit()


def assemble(head: dict[str, Any], parts: dict[tuple[int, int], dict[str, Any]]) -> dict[str, Any]:
    """A run's full VIEW from its head and the latest values of its page parts (`(page, part) ->
    page record`): the shape `ckptlog fold` prints. A head without `pages` is the whole view.

    Only what the head can own is merged: the parts part 0 names, and of their entries those whose
    report index lies in their page and below the head's `committed` (every kept checkpoint's does).
    So a page record an earlier owner left behind for reports the head has not seen yet (under
    at_least_once, a batch published but not committed) never shows (contract §4)."""
    pages = head.get("pages")
    if not pages:
        return head
    span = pages.get("span") if isinstance(pages, dict) else None
    committed = head.get("committed")
    entries: list[dict[str, Any]] = []
    if isinstance(span, int) and isinstance(committed, int):
        for (page, part), record in sorted(parts.items()):
            first = parts.get((page, 0))
            if first is None or not part < _parts_named(first):
                continue
            low, high = page * span, min((page + 1) * span, committed)
            entries.extend(e for e in _entries(record) if low <= e["report_index"] < high)
    entries.sort(key=_order)
    view = {k: v for k, v in head.items() if k != "pages"}
    view["checkpoints"] = [{k: v for k, v in e.items() if k != "sort"} for e in entries]
    return view


def _parts_named(first: dict[str, Any]) -> int:
    parts = first.get("parts", 1)
    return parts if isinstance(parts, int) else 0


def _entries(record: dict[str, Any]) -> list[dict[str, Any]]:
    found = record.get("checkpoints")
    if not isinstance(found, list):
        return []
    return [e for e in found if isinstance(e, dict) and type(e.get("report_index")) is int]


def _order(entry: dict[str, Any]) -> tuple[bool, Any, int]:
    """(has a score, the score, report index): ascending, best last, as the fold sorts."""
    score = entry.get("sort")
    number = isinstance(score, int | float) and not isinstance(score, bool) and score == score  # not NaN
    return number, score if number else 0, entry["report_index"]
