"""The decode fast path: msgspec Structs for the three events that make up nearly all traffic.

Pydantic (events/models.py) stays the contract: it generates the JSON Schema and diagnoses
every bad event with a reason code. But its validation costs ~4 µs per report, three times
msgspec's, and the fold budget is ~10 µs per report. So `decode_event` first tries these
Structs; they accept a strict *subset* of what the pydantic models accept (no extension
attributes, `validation` only as a bool, no NaN/Infinity literals) and yield the same field
values. Anything they refuse goes to pydantic, which accepts it or says precisely why not.
tests/unit/events/test_fastpath.py checks the subset-and-equal property with hypothesis.

The fast path also vouches for the depth limit: metric values are typed as JSON nested at most
`FAST_NESTING` containers deep, so an event it accepts nests at most `FAST_MAX_DEPTH` levels,
and `decode_event` skips its bracket scan for it (a scan of every byte, twice).

The Structs carry the attribute names of the pydantic models (`subject`, `id`,
`data.checkpoint.path`, …), so the fold reads either kind the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

import msgspec

from events.models import MAX_COMPLETED_PATHS, RUN_ID_MAX, check_time

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
else:  # for msgspec: JSON values nested at most FAST_NESTING deep
    Metrics = dict[str, _json_nested(FAST_NESTING)]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
# \Z, not $: Python's $ also matches before a trailing newline; pydantic's (Rust) does not.
# The run id's character class (RUN_ID_CHAR: no control characters) is checked in decode_fast
# with str.isprintable(), a subset of it, instead of a msgspec pattern: that calls into `re`
# for every event (~0.4 µs, a twentieth of a report's whole fold).
RunId = Annotated[str, msgspec.Meta(min_length=1, max_length=RUN_ID_MAX)]
TerminalStatus = Literal["VALIDATED", "VALIDATION_FAILED", "VALIDATION_TIMEOUT"]


class FastCheckpointRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    path: NonEmpty


class FastReportData(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    metrics: Metrics
    checkpoint: FastCheckpointRef | None = None
    validation: bool = False
    generation: Annotated[int, msgspec.Meta(ge=0)] | None = None


class FastValidationResultData(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    checkpoint_path: NonEmpty
    status: TerminalStatus
    metrics: Metrics = {}
    error: str | None = None


class FastDeletionCompletedData(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    checkpoint_paths: Annotated[list[NonEmpty], msgspec.Meta(min_length=1, max_length=MAX_COMPLETED_PATHS)]


class _Envelope(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, tag_field="type"):
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


class FastReport(_Envelope, frozen=True, kw_only=True, tag="ckptlog.report.v1"):
    data: FastReportData


class FastValidationResult(_Envelope, frozen=True, kw_only=True, tag="ckptlog.validation_result.v1"):
    data: FastValidationResultData


class FastDeletionCompleted(_Envelope, frozen=True, kw_only=True, tag="ckptlog.deletion_completed.v2"):
    data: FastDeletionCompletedData


FastEvent = FastReport | FastValidationResult | FastDeletionCompleted
_DECODER = msgspec.json.Decoder(FastEvent)


def decode_fast(raw: bytes) -> FastEvent | None:
    """The event, or None when the fast path cannot vouch for it (pydantic decides then).
    An event returned nests at most `FAST_MAX_DEPTH` levels deep."""
    try:
        event = _DECODER.decode(raw)
    except msgspec.DecodeError:
        return None
    if not event.subject.isprintable():  # printable: no control characters (a subset of RUN_ID_CHAR)
        return None
    if event.time is not None:
        try:
            check_time(event.time)
        except ValueError:
            return None
    return event
