"""The decoded input events: the one shape `decode_event` yields and the fold reads.

Frozen msgspec Structs for every input type and their data, with the attribute names of
the pydantic models (ckptlog/events/models.py), so the fold has one handler per type; and the input
table, `INPUT_KINDS`: one row per input kind (its model, Struct, handler, fast path and
upcasters), from which every list of input kinds is derived (docs/design.md, "One table per
direction"). Pydantic stays
the contract — the JSON Schema, the precise rejection reasons, the rare events — but its
validation costs ~4 µs per report, three times msgspec's, and the fold's budget is ~10 µs.
So there are two routes into these Structs:

- `decode_fast(raw)`: msgspec decodes reports, validation results and deletion completions
  (nearly all traffic; the rows with `fast`) straight into them. It accepts a strict *subset* of what pydantic
  accepts, with equal values, and returns None for anything it cannot vouch for: extension
  attributes, NaN/Infinity literals (msgspec cannot parse them), `validation` as an object,
  a run id with control characters, a `time` that is not RFC 3339, and the other two types.
  tests/unit/events/test_fastpath.py checks the subset-and-equal property with hypothesis.
- `from_model(model, kind)`: whatever pydantic accepted, copied field by field into the Struct
  of the same name. Extension attributes are not fields, so they are dropped.

The fast path also vouches for the depth limit: msgspec decodes metric values as JSON nested
at most `FAST_NESTING` containers deep, so an event it accepts nests at most `FAST_MAX_DEPTH`
levels and `decode_event` skips its bracket scan for it (counting brackets costs a third of a
decode). The bound lives in the `Metrics` annotation, so it applies only when msgspec decodes:
`from_model` does not re-validate and copies the deeper metrics pydantic accepted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, TypeVar, Union

import msgspec
from pydantic import BaseModel, Field

from ckptlog.events import models, upcast
from ckptlog.events.models import MAX_COMPLETED_PATHS, RUN_ID_MAX, check_time
from ckptlog.events.upcast import Upcaster

FAST_NESTING = 8  # msgspec expands the nested type as a tree: 2**8 nodes, built in ~7 ms
#: The deepest event the fast path accepts: envelope > data > metrics > FAST_NESTING containers.
FAST_MAX_DEPTH = 3 + FAST_NESTING


def _json_nested(levels: int) -> Any:
    """JSON values with at most `levels` nested arrays/objects: `Any` with a depth bound."""
    scalar: Any = Union[None, bool, int, float, str]  # noqa: UP007
    value = scalar
    for _ in range(levels):
        value = Union[None, bool, int, float, str, list[value], dict[str, value]]  # type: ignore[valid-type]  # noqa: UP007
    return value


if TYPE_CHECKING:  # for the type checker: JSON values
    Metrics = dict[str, Any]
else:  # for msgspec's decoder: JSON values nested at most FAST_NESTING deep
    Metrics = dict[str, _json_nested(FAST_NESTING)]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
# The run id's character class (RUN_ID_CHAR: no control characters) is checked in decode_fast
# with str.isprintable(), a subset of it, rather than a msgspec pattern: that calls into `re`
# for every event (~0.4 µs, a twentieth of a report's whole fold).
RunId = Annotated[str, msgspec.Meta(min_length=1, max_length=RUN_ID_MAX)]
TerminalStatus = Literal["VALIDATED", "VALIDATION_FAILED", "VALIDATION_TIMEOUT"]


class _Data(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Base of every data Struct: immutable, and an unknown field fails the fast decode."""


class ValidationSpec(_Data, frozen=True):
    fn_kwargs: dict[str, Any] = {}
    timeout_s: Annotated[float, msgspec.Meta(gt=0)] | None = None


class CheckpointConfig(_Data, frozen=True):
    num_to_keep: Annotated[int, msgspec.Meta(ge=1)] | None = None
    checkpoint_score_attribute: NonEmpty | None = None
    checkpoint_score_order: Literal["max", "min"] = "max"
    # fmt: off
    # --- generated from ckptlog/events/retention_rules.py by python -m ckptlog.events.rule_codegen ---
    keep_every_n_steps: Annotated[int, msgspec.Meta(ge=1)] | None = None
    step_attribute: NonEmpty | None = None
    keep_time_interval_s: Annotated[float, msgspec.Meta(gt=0)] | None = None
    # --- end of generated code ---
    # fmt: on


class RunStartedData(_Data, frozen=True):
    storage_path: NonEmpty
    checkpoint_config: CheckpointConfig = msgspec.field(default_factory=CheckpointConfig)
    validation: ValidationSpec = msgspec.field(default_factory=ValidationSpec)


class CheckpointRef(_Data, frozen=True):
    path: NonEmpty


class ReportData(_Data, frozen=True):
    metrics: Metrics
    checkpoint: CheckpointRef | None = None
    validation: bool | ValidationSpec = False
    generation: Annotated[int, msgspec.Meta(ge=0)] | None = None


class ValidationResultData(_Data, frozen=True):
    checkpoint_path: NonEmpty
    status: TerminalStatus
    metrics: Metrics = {}
    error: str | None = None


class WorkerGroupRestartData(_Data, frozen=True):
    num_workers: Annotated[int, msgspec.Meta(ge=1)]
    reason: str | None = None
    generation: Annotated[int, msgspec.Meta(ge=1)] | None = None


class RunFinishedData(_Data, frozen=True):
    keep: Literal["kept", "best"] = "kept"


class RunForgottenData(_Data, frozen=True):
    pass


class RunReopenedData(_Data, frozen=True):
    pass


class CompletedPath(_Data, frozen=True):
    checkpoint_path: NonEmpty
    eviction: Annotated[int, msgspec.Meta(ge=0)] | None = None


class RefusedPath(_Data, frozen=True):
    checkpoint_path: NonEmpty
    reason: str
    eviction: Annotated[int, msgspec.Meta(ge=0)] | None = None


Completions = Annotated[list[CompletedPath], msgspec.Meta(max_length=MAX_COMPLETED_PATHS)]
Refusals = Annotated[list[RefusedPath], msgspec.Meta(max_length=MAX_COMPLETED_PATHS)]


class DeletionCompletedData(_Data, frozen=True):
    deleted: Completions = []
    refused: Refusals = []


class RootRefusedData(_Data, frozen=True):
    storage_path: NonEmpty
    reason: str


class _Envelope(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, tag_field="type"):
    """CloudEvents 1.0 attributes; the event type is the Struct's tag."""

    specversion: Literal["1.0"]
    id: NonEmpty
    source: NonEmpty
    subject: RunId
    time: str | None = None
    datacontenttype: Literal["application/json"] | None = None

    @property
    def type(self) -> str:
        """The CloudEvents type, as on the pydantic models (msgspec keeps it as the tag)."""
        tag = self.__struct_config__.tag
        assert isinstance(tag, str)
        return tag


class RunStarted(_Envelope, frozen=True, kw_only=True, tag="ckptlog.run_started.v1"):
    data: RunStartedData


class Report(_Envelope, frozen=True, kw_only=True, tag="ckptlog.report.v1"):
    data: ReportData


class ValidationResult(_Envelope, frozen=True, kw_only=True, tag="ckptlog.validation_result.v1"):
    data: ValidationResultData


class WorkerGroupRestart(_Envelope, frozen=True, kw_only=True, tag="ckptlog.worker_group_restart.v1"):
    data: WorkerGroupRestartData


class DeletionCompleted(_Envelope, frozen=True, kw_only=True, tag="ckptlog.deletion_completed.v3"):
    data: DeletionCompletedData


class RunFinished(_Envelope, frozen=True, kw_only=True, tag="ckptlog.run_finished.v1"):
    data: RunFinishedData


class RunForgotten(_Envelope, frozen=True, kw_only=True, tag="ckptlog.run_forgotten.v1"):
    data: RunForgottenData


class RootRefused(_Envelope, frozen=True, kw_only=True, tag="ckptlog.root_refused.v1"):
    data: RootRefusedData


class RunReopened(_Envelope, frozen=True, kw_only=True, tag="ckptlog.run_reopened.v1"):
    data: RunReopenedData


@dataclass(frozen=True, slots=True)
class InputKind:
    """One input event kind: everything the codec, the fold, the schemas and the metrics need to
    know about it, so that adding a kind is one row of `INPUT_KINDS` (and its model, Struct and
    handler) instead of six registries in as many files.

    `model` is the pydantic envelope (the contract: the JSON Schema, the diagnosis of a refusal),
    `struct` what decoding yields and the fold reads, `handler` the name of what applies it (a name:
    ckptlog/events/ does not import the fold; `Fold.handler` resolves it: a `Fold` method such as `_report`,
    or `lifecycle.restart`, a function of ckptlog/processor/core/lifecycle.py), `fast` whether msgspec's fast path may
    decode it (`decode_fast`: only where tests/unit/events/test_fastpath.py vouches for it), and
    `upcasters` the older versions still read, by the version each step reads (ckptlog/events/upcast.py).
    `name` and `version` come from the Struct's tag, `ckptlog.{name}.v{version}`."""

    model: type[models.Envelope]
    struct: type[_Envelope]
    handler: str
    fast: bool = False
    upcasters: Mapping[int, Upcaster] = field(default_factory=dict)
    name: str = field(init=False)
    version: int = field(init=False)

    def __post_init__(self) -> None:
        match = _TYPE_NAME.match(str(self.struct.__struct_config__.tag))
        if match is None:
            raise ValueError(f"{self.struct.__name__}: the tag must read ckptlog.{{name}}.v{{version}}")
        object.__setattr__(self, "name", match.group(1))
        object.__setattr__(self, "version", int(match.group(2)))

    @property
    def type(self) -> str:
        """The CloudEvents type of the newest version, e.g. `ckptlog.report.v1`."""
        return f"ckptlog.{self.name}.v{self.version}"


_TYPE_NAME = re.compile(r"^ckptlog\.([a-z_]+)\.v([0-9]+)$")

INPUT_KINDS: tuple[InputKind, ...] = (
    InputKind(models.RunStarted, RunStarted, "lifecycle.run_started"),
    InputKind(models.Report, Report, "_report", fast=True),
    InputKind(models.ValidationResult, ValidationResult, "_validation_result", fast=True),
    InputKind(models.WorkerGroupRestart, WorkerGroupRestart, "lifecycle.restart"),
    InputKind(
        models.DeletionCompleted,
        DeletionCompleted,
        "lifecycle.deletion_completed",
        fast=True,
        upcasters={1: upcast.deletion_completed_v1, 2: upcast.deletion_completed_v2},
    ),
    InputKind(models.RunFinished, RunFinished, "lifecycle.run_finished"),
    InputKind(models.RunForgotten, RunForgotten, "lifecycle.run_forgotten"),
    InputKind(models.RootRefused, RootRefused, "lifecycle.root_refused"),
    InputKind(models.RunReopened, RunReopened, "lifecycle.run_reopened"),
)
"""The input table: every input event kind this build reads. Everything below is derived from it."""

INPUTS: dict[str, InputKind] = {kind.name: kind for kind in INPUT_KINDS}
"""Event name (`report`) -> its kind."""
INPUT_TYPES: dict[str, int] = {kind.name: kind.version for kind in INPUT_KINDS}
"""Event name -> the newest version this build reads."""
EVENT_TYPES: dict[str, type[_Envelope]] = {kind.type: kind.struct for kind in INPUT_KINDS}
"""CloudEvents type -> its Struct (what `from_model` builds from a validated input event)."""

if TYPE_CHECKING:  # for the type checker: the base classes (the fold dispatches on the class)
    DecodedEvent: TypeAlias = _Envelope
    InputEvent: TypeAlias = models.Envelope
else:  # at run time, the unions of the table's Structs and models (decoders and the TypeAdapter read them)
    DecodedEvent = Union[tuple(kind.struct for kind in INPUT_KINDS)]  # noqa: UP007
    InputEvent = Annotated[Union[tuple(kind.model for kind in INPUT_KINDS)], Field(discriminator="type")]  # noqa: UP007
_FAST = msgspec.json.Decoder(Union[tuple(kind.struct for kind in INPUT_KINDS if kind.fast)])  # noqa: UP007


def decode_fast(raw: bytes) -> DecodedEvent | None:
    """The event, or None when the fast path cannot vouch for it (pydantic decides then).
    An event returned nests at most `FAST_MAX_DEPTH` levels deep."""
    try:
        event = _FAST.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # RecursionError: an unbounded `fn_kwargs`
        return None
    if not event.subject.isprintable():  # printable: no control characters (a subset of RUN_ID_CHAR)
        return None
    if event.time is not None:
        try:
            check_time(event.time)
        except ValueError:
            return None
    data = event.data
    if isinstance(data, ReportData) and data.validation.__class__ is not bool:
        return None  # a ValidationSpec: its fn_kwargs are JSON of any depth, beyond the fast path's bound
    if isinstance(data, DeletionCompletedData) and not (data.deleted or data.refused):
        return None  # pydantic says why (an empty completion)
    vouched: DecodedEvent = event  # the decoder's union is built from the table: Any to the type checker
    return vouched


S = TypeVar("S", bound=msgspec.Struct)
_STRUCTS: dict[str, type[msgspec.Struct]] = {
    name: value
    for name, value in list(globals().items())
    if isinstance(value, type) and issubclass(value, _Data | _Envelope) and not name.startswith("_")
}
"""Every Struct of this module by name: `from_model` copies a model into the Struct of its class's name."""


def from_model(model: BaseModel, kind: type[S]) -> S:
    """`model` (already validated by pydantic) as the Struct of its class's name, nested models
    likewise; only the Struct's fields are copied, so extension attributes are dropped."""
    struct = _copy(model)
    if not isinstance(struct, kind):
        raise TypeError(f"{type(model).__name__} converts to {type(struct).__name__}, not {kind.__name__}")
    return struct


def _copy(model: BaseModel) -> msgspec.Struct:
    kind = _STRUCTS[type(model).__name__]
    values = {}
    for name in kind.__struct_fields__:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            value = _copy(value)
        elif isinstance(value, list) and value and isinstance(value[0], BaseModel):
            value = [_copy(item) for item in value]
        values[name] = value
    return kind(**values)
