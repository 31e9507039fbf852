"""The evaluator's wire side: `validation_requested` in, `validation_result` out (contract §2, §5).

Building a result is total: a result the processor would refuse, or one whose metrics cannot even
be encoded (user objects run user code while they are encoded), becomes VALIDATION_FAILED saying
why, and `bare_result` sends VALIDATION_FAILED without any user data when all else failed.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from ckptlog.client import ids
from ckptlog.client.bodies import encode_checked, envelope
from ckptlog.client.errors import InvalidEvent
from ckptlog.client.invoke import Outcome, describe, safe_text
from ckptlog.events.codec import DEFAULT_MAX_BYTES
from ckptlog.events.outputs import VALIDATION_REQUESTED, OutputEnvelope, ValidationRequested

SOURCE = "ckptlog/evaluator"
RESULT_MAX_BYTES = DEFAULT_MAX_BYTES - 4096
"""A result's largest encoding: the producer refuses a record over its max_request_size (1 MiB)
once the record's framing and key are added (MessageSizeTooLargeError, on every retry)."""


def parse_request(value: bytes | None) -> tuple[OutputEnvelope, ValidationRequested] | None:
    """A validation_requested event, or None for anything else on the topic."""
    if value is None:
        return None
    try:
        event = OutputEnvelope.model_validate_json(value)
        if event.name != VALIDATION_REQUESTED.name:
            return None
        return event, ValidationRequested.model_validate(event.data)
    except ValidationError:
        return None


def _data(spec: ValidationRequested, outcome: Outcome) -> dict[str, Any]:
    return {
        "checkpoint_path": spec.checkpoint_path,
        "status": outcome.status,
        "metrics": outcome.metrics,
        "error": outcome.error,
    }


def _encode(request: OutputEnvelope, spec: ValidationRequested, outcome: Outcome) -> bytes:
    event_id = ids.validation_result_id(request.subject, request.id)
    raw = encode_checked(envelope("validation_result", request.subject, _data(spec, outcome), event_id, SOURCE))
    if len(raw) > RESULT_MAX_BYTES:
        raise InvalidEvent(
            f"the result is {len(raw)} bytes, over the {RESULT_MAX_BYTES} a validation result may have; "
            "return fewer or smaller metrics (large data by reference: a path)"
        )
    return raw


def encode_result(request: OutputEnvelope, spec: ValidationRequested, outcome: Outcome) -> tuple[Outcome, bytes]:
    """The validation_result for `outcome`, and the outcome it reports: `outcome` itself, or
    VALIDATION_FAILED with "unusable result: why" when that cannot be sent."""
    try:
        return outcome, _encode(request, spec, outcome)
    except InvalidEvent as exc:
        reason = safe_text(str(exc))
    except BaseException as exc:  # a metric's .item(), .tolist() or repr raised; too deep to encode
        reason = describe(exc)
    failed = Outcome("VALIDATION_FAILED", error=safe_text(f"unusable result: {reason}"))
    return failed, _encode(request, spec, failed)


def result_event(request: OutputEnvelope, spec: ValidationRequested, outcome: Outcome) -> bytes:
    """The validation_result for `request`; a result the processor would refuse (e.g. metrics
    that are not JSON) becomes VALIDATION_FAILED saying why."""
    return encode_result(request, spec, outcome)[1]


def bare_result(request: OutputEnvelope, spec: ValidationRequested, error: str) -> tuple[Outcome, bytes]:
    """VALIDATION_FAILED with `error` and no user data, encoded as plain ASCII JSON without the
    processor's checks: for when building the real result failed (a bug)."""
    failed = Outcome("VALIDATION_FAILED", error=safe_text(error))
    event_id = ids.validation_result_id(request.subject, request.id)
    event = envelope("validation_result", request.subject, _data(spec, failed), event_id, SOURCE)
    return failed, json.dumps(event, separators=(",", ":")).encode()
