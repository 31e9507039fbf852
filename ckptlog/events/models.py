"""Pydantic v2 models of every input event (contract §2) in the CloudEvents 1.0 envelope.

Validation is strict (no "5" for 5, no unknown `data` fields) because a silently ignored
typo such as `num_to_kep` would change retention without anyone noticing.

These models are the contract: the JSON Schema in schemas/ and the precise rejection reasons
come from them. What the fold reads is their mirror in msgspec Structs (ckptlog/events/decoded.py), where
the input table (`INPUT_KINDS`) pairs each envelope model with its Struct and its handler.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

RUN_ID_MAX = 256
RUN_ID_CHAR = r"[^\x00-\x1f\x7f-\x9f]"  # no control characters (C0, DEL, C1) (decoded.py's fast path accepts a subset)
RunId = Annotated[str, StringConstraints(min_length=1, max_length=RUN_ID_MAX, pattern=rf"^{RUN_ID_CHAR}+$")]
NonEmpty = Annotated[str, StringConstraints(min_length=1)]
Status = Literal["COMMITTED", "PENDING_VALIDATION", "VALIDATED", "VALIDATION_TIMEOUT", "VALIDATION_FAILED"]
TerminalStatus = Literal["VALIDATED", "VALIDATION_FAILED", "VALIDATION_TIMEOUT"]

_EXTENSION_NAME = re.compile(r"^[a-z0-9]+$")
_STRICT = ConfigDict(strict=True, extra="forbid", frozen=True)

# For the JSON Schema only (validation is the validators below): what other languages check.
_DATE = (
    r"(?!0000)(?:\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)"
    r"|02-(?:0[1-9]|1\d|2[0-8]))|(?:\d{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)"
)
RFC3339 = rf"^{_DATE}[Tt ](?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$"
"""The RFC 3339 timestamps `check_time` accepts, as a pattern (the schema of `time`): valid dates only,
seconds 00-59, an offset under 24 h, upper-case Z. `check_time` also takes other ISO 8601 spellings."""


def _envelope_schema(schema: dict[str, Any]) -> None:
    """Extension attributes: lower-case alphanumeric names (the `_extension_names` validator)."""
    schema["patternProperties"] = {_EXTENSION_NAME.pattern: {}}
    schema["additionalProperties"] = False


class ValidationSpec(BaseModel):
    """What an evaluator needs: keyword arguments for the user function and a time limit."""

    model_config = _STRICT
    fn_kwargs: dict[str, Any] = Field(default_factory=dict)
    timeout_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None


class CheckpointConfig(BaseModel):
    """Ray's CheckpointConfig: how many to keep and by which metric; and retention beyond Ray:
    checkpoints preserved for good, exempt from eviction and from `num_to_keep`."""

    model_config = _STRICT
    num_to_keep: Annotated[int, Field(ge=1)] | None = None
    checkpoint_score_attribute: NonEmpty | None = None
    checkpoint_score_order: Literal["max", "min"] = "max"
    # fmt: off
    # --- generated from ckptlog/events/retention_rules.py by python -m ckptlog.events.rule_codegen ---
    keep_every_n_steps: Annotated[int, Field(ge=1)] | None = Field(
        default=None,
        description=(
            "Preserve every checkpoint whose step is a multiple of N (Orbax's keep_period)."
        ),
    )
    step_attribute: NonEmpty | None = Field(
        default=None,
        description=(
            "The metric holding the step (flattened with '/'); default: the report's 1-based number."
        ),
    )
    keep_time_interval_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = Field(
        default=None,
        description=(
            "Preserve a checkpoint reported (CloudEvents `time`) at least this long after the last one this "
            "rule preserved; the first timed one is (Orbax's keep_time_interval)."
        ),
    )
    # --- end of generated code ---
    # fmt: on


class RunStartedData(BaseModel):
    model_config = _STRICT
    storage_path: NonEmpty
    checkpoint_config: CheckpointConfig = Field(default_factory=CheckpointConfig)
    validation: ValidationSpec = Field(default_factory=ValidationSpec)


class CheckpointRef(BaseModel):
    model_config = _STRICT
    path: NonEmpty


class ReportData(BaseModel):
    model_config = _STRICT
    metrics: dict[str, Any]
    checkpoint: CheckpointRef | None = None
    validation: bool | ValidationSpec = False
    generation: Annotated[int, Field(ge=0)] | None = None


class ValidationResultData(BaseModel):
    model_config = _STRICT
    checkpoint_path: NonEmpty
    status: TerminalStatus
    metrics: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None


class WorkerGroupRestartData(BaseModel):
    """`generation`: the generation this restart starts (absent: the current one + 1); a restart
    for a generation the run already reached is a no-op with a warning (contract §3)."""

    model_config = _STRICT
    num_workers: Annotated[int, Field(ge=1)]
    reason: str | None = None
    generation: Annotated[int, Field(ge=1)] | None = None


FinishKeep = Literal["kept", "best"]


class RunFinishedData(BaseModel):
    """The run is over (contract §3 "Finished runs"). `keep`: what its storage keeps for good —
    `kept` (default): the kept set as it is; `best`: only the best, besides the latest, pending
    and preserved checkpoints, which are never evicted."""

    model_config = _STRICT
    keep: FinishKeep = "kept"


class RunForgottenData(BaseModel):
    """An operator drops a run (contract §3 "Forgotten runs"): nothing to say beyond the run id."""

    model_config = _STRICT


class RunReopenedData(BaseModel):
    """A finished run goes on (contract §3 "Reopened runs"), its state as it finished: nothing to
    say beyond the run id."""

    model_config = _STRICT


MAX_COMPLETED_PATHS = 1000


class CompletedPath(BaseModel):
    """One eviction confirmed gone. `eviction` names which eviction of the path (the run counts
    them), so a path reported again and evicted again is confirmed again; null (upcast from v2)
    confirms whichever eviction of the path is outstanding."""

    model_config = _STRICT
    checkpoint_path: NonEmpty
    eviction: Annotated[int, Field(ge=0)] | None = None


class RefusedPath(BaseModel):
    """One eviction the deleter refused to carry out (contract §9): final, nothing was touched."""

    model_config = _STRICT
    checkpoint_path: NonEmpty
    reason: str
    eviction: Annotated[int, Field(ge=0)] | None = None


class DeletionCompletedData(BaseModel):
    """Internal: written back by the processor once evictions are settled in storage.

    v3 names each eviction (`deleted`, `refused`); v2 listed confirmed paths only
    (`checkpoint_paths`) and v1 one path; older bodies are upcast (ckptlog/events/upcast.py)."""

    model_config = ConfigDict(
        **_STRICT,
        json_schema_extra={
            "anyOf": [
                {"required": ["deleted"], "properties": {"deleted": {"minItems": 1}}},
                {"required": ["refused"], "properties": {"refused": {"minItems": 1}}},
            ]
        },
    )
    deleted: Annotated[list[CompletedPath], Field(max_length=MAX_COMPLETED_PATHS)] = Field(default_factory=list)
    refused: Annotated[list[RefusedPath], Field(max_length=MAX_COMPLETED_PATHS)] = Field(default_factory=list)

    @model_validator(mode="after")
    def _not_empty(self) -> DeletionCompletedData:
        if not self.deleted and not self.refused:
            raise ValueError("a deletion_completed event confirms or refuses at least one eviction")
        return self


class RootRefusedData(BaseModel):
    """Internal: written by the processor when it found a run's root reached through a symlink
    below `--storage-root` (contract §9 *Roots behind a symlink*): `storage_path` is the root as
    registered (canonical), `reason` what the processor saw (which path is a link, to where)."""

    model_config = _STRICT
    storage_path: NonEmpty
    reason: str


class Envelope(BaseModel):
    """CloudEvents 1.0 structured mode. Extension attributes are kept and otherwise ignored."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True, json_schema_extra=_envelope_schema)
    specversion: Literal["1.0"]
    id: NonEmpty
    source: NonEmpty
    type: str
    subject: RunId
    time: Annotated[str | None, Field(json_schema_extra={"pattern": RFC3339})] = None
    datacontenttype: Literal["application/json"] | None = None

    @field_validator("time")
    @classmethod
    def _rfc3339(cls, value: str | None) -> str | None:
        if value is not None:
            check_time(value)
        return value

    @model_validator(mode="after")
    def _extension_names(self) -> Envelope:
        extra = self.__pydantic_extra__
        if extra:
            for name in extra:
                if not _EXTENSION_NAME.match(name):
                    raise ValueError(
                        f"extension attribute {name!r} must be lower-case letters and digits only (CloudEvents 1.0)"
                    )
        return self


def check_time(value: str) -> None:
    """CloudEvents `time` must be RFC 3339 (shared with the decode fast path)."""
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"time {value!r} is not RFC 3339; send e.g. 2026-01-31T12:00:00Z or omit it") from None


class RunStarted(Envelope):
    type: Literal["ckptlog.run_started.v1"]
    data: RunStartedData


class Report(Envelope):
    type: Literal["ckptlog.report.v1"]
    data: ReportData


class ValidationResult(Envelope):
    type: Literal["ckptlog.validation_result.v1"]
    data: ValidationResultData


class WorkerGroupRestart(Envelope):
    type: Literal["ckptlog.worker_group_restart.v1"]
    data: WorkerGroupRestartData


class RunFinished(Envelope):
    type: Literal["ckptlog.run_finished.v1"]
    data: RunFinishedData


class RunForgotten(Envelope):
    type: Literal["ckptlog.run_forgotten.v1"]
    data: RunForgottenData


class RunReopened(Envelope):
    type: Literal["ckptlog.run_reopened.v1"]
    data: RunReopenedData


class DeletionCompleted(Envelope):
    type: Literal["ckptlog.deletion_completed.v3"]
    data: DeletionCompletedData


class RootRefused(Envelope):
    type: Literal["ckptlog.root_refused.v1"]
    data: RootRefusedData
