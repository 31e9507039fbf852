"""Everything the service writes, as `OutRecord`s: routed fold outputs, run views, dead letters
and the internal deletion_completed events.

Routing (see docs/processor.md): `validation_requested` -> validations topic; `watermark` ->
watermarks topic; every other output -> checkpoints topic; the run VIEW -> the compacted state
topic. Keys are run ids. Output ids come from the input coordinates,
so a replay produces byte-identical records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import msgspec
import pydantic_core

from events.outputs import PROCESSOR_SOURCE, envelope, output_id
from events.rejections import Rejection
from processor import __version__
from processor.core.outputs import Output
from processor.core.view import View
from processor.kafka.records import Header, InputRecord, OutRecord, PartitionId

DLQ_PREFIX = "__connect.errors."
"""Kafka Connect's dead-letter header names, so Connect-aware tools show our errors too."""
H_TOPIC = DLQ_PREFIX + "topic"
H_PARTITION = DLQ_PREFIX + "partition"
H_OFFSET = DLQ_PREFIX + "offset"
H_STAGE = DLQ_PREFIX + "stage"
H_CLASS = DLQ_PREFIX + "exception.class.name"
H_MESSAGE = DLQ_PREFIX + "exception.message"
H_REASON = "__ckptlog.errors.reason"
H_VERSION = "__ckptlog.errors.processor.version"
DELETION_COMPLETED = "ckptlog.deletion_completed.v2"
_NO_HEADERS: tuple[Header, ...] = ()

_fast_json = msgspec.json.Encoder().encode
_exact_json = partial(pydantic_core.to_json, inf_nan_mode="constants")


def encode_json(value: Any) -> bytes:
    """Compact UTF-8 JSON with NaN/Infinity literals, like events.outputs.encode_json (Python's json with
    allow_nan); floats may be spelled differently (1e-07, 1e+16 vs 1e-7, 1e16), never valued differently.

    msgspec (~3x faster than pydantic-core here) writes NaN/Infinity as `null`, so any output with a
    `null` in it (a real None, a non-finite float, or just the text) is encoded again by pydantic-core,
    which keeps the literals. The choice depends only on the value: a replay gives the same bytes."""
    try:
        out = _fast_json(value)
    except (TypeError, ValueError, OverflowError):  # a type msgspec does not know: pydantic-core decides
        return _exact_json(value)
    return _exact_json(value) if out.count(b"null") else out


_ID = b'{"specversion":"1.0","id":'
_DATA = b',"datacontenttype":"application/json","data":'


_SEQS = 16
_RUN_CACHE_LIMIT = 100_000
_SEQ = [b'%d"' % seq for seq in range(_SEQS)]  # an id's '{seq}"' ending


_new = tuple.__new__  # builds OutRecord tuples without their Python-level __new__


class _RunPieces:
    """One run's Kafka key, and per output type its topic and the envelope JSON from the end of
    the id to the start of `data` (source, type, subject, datacontenttype)."""

    __slots__ = ("key", "middles", "subject")

    def __init__(self, key: bytes, subject: bytes) -> None:
        self.key, self.subject = key, subject
        self.middles: dict[str, tuple[str, bytes]] = {}

    def middle(self, kind: str, names: TopicNames) -> tuple[str, bytes]:
        topic = (
            names.watermarks
            if kind == "watermark"
            else names.validations
            if kind == "validation_requested"
            else names.checkpoints
        )
        head = f',"source":"{PROCESSOR_SOURCE}","type":"ckptlog.{kind}.v1","subject":'.encode()
        pieces = self.middles[kind] = (topic, head + self.subject + _DATA)
        return pieces


def deletion_completed_event(run_id: str, paths: Sequence[str]) -> dict[str, Any]:
    """The internal `ckptlog.deletion_completed.v2` event confirming that `paths` are gone. The id
    is a digest of the paths: a retried send of the same confirmations is a duplicate."""
    digest = hashlib.sha256("\n".join(sorted(paths)).encode()).hexdigest()[:32]
    return {
        "specversion": "1.0",
        "id": f"deleted:{run_id}:{digest}",
        "source": PROCESSOR_SOURCE,
        "type": DELETION_COMPLETED,
        "subject": run_id,
        "datacontenttype": "application/json",
        "data": {"checkpoint_paths": list(paths)},
    }


@dataclass(frozen=True, slots=True)
class TopicNames:
    input: str
    checkpoints: str
    validations: str
    watermarks: str
    state: str
    dlq: str


class RecordFactory:
    """Builds the records of one input partition."""

    def __init__(self, names: TopicNames, pid: PartitionId) -> None:
        self.names, self.pid = names, pid
        # '{"specversion":"1.0","id":"ckptlog:{topic}:{partition}:' -- JSON-escaped, without the closing quote
        self._id_prefix = _ID + encode_json(output_id(pid.topic, pid.partition, 0, 0))[:-4]
        self._runs: dict[str, _RunPieces] = {}  # ids and subjects repeat per event

    def outputs(self, run_id: str, offset: int, outputs: Sequence[Output], into: list[OutRecord]) -> None:
        """Append the envelopes of one applied event's outputs (sequence = index in `outputs`).

        Byte-identical to `encode_json(envelope(...))`, built from pre-encoded pieces (hot path: ~3
        records per event): the id is the partition's prefix + offset + sequence, and the run caches,
        per output type, its topic and the JSON between the id and `data`; only `data` is encoded."""
        run = self._runs.get(run_id) or self._run_pieces(run_id)
        key, middles = run.key, run.middles
        id_offset = b"%b%d:" % (self._id_prefix, offset)
        append, join, fast = into.append, b"".join, _fast_json
        for seq, (kind, data) in enumerate(outputs):
            topic, middle = middles.get(kind) or run.middle(kind, self.names)
            try:  # encode_json(data), inlined: a frame per output is a tenth of this loop
                body = fast(data)
            except (TypeError, ValueError, OverflowError):
                body = _exact_json(data)
            if body.count(b"null"):  # not `in`: bytes.__contains__ first tries the argument as an int (an exception)
                body = _exact_json(data)
            value = join((id_offset, _SEQ[seq] if seq < _SEQS else b'%d"' % seq, middle, body, b"}"))
            append(_new(OutRecord, (topic, key, value, _NO_HEADERS, None)))

    def _run_pieces(self, run_id: str) -> _RunPieces:
        """A run's cached pieces: every output and completion needs them."""
        pieces = self._runs.get(run_id)
        if pieces is None:
            if len(self._runs) >= _RUN_CACHE_LIMIT:
                self._runs.clear()
            pieces = self._runs[run_id] = _RunPieces(run_id.encode(), encode_json(run_id))
        return pieces

    def view(self, run_id: str, view: View) -> OutRecord:
        return OutRecord(self.names.state, run_id.encode(), encode_json(view))

    def dead_letter(self, record: InputRecord, rejection: Rejection, stage: str) -> OutRecord:
        """The original key, value and headers plus Connect-style error headers."""
        headers: list[Header] = list(record.headers or ())
        headers += [
            (H_TOPIC, record.topic.encode()),
            (H_PARTITION, str(record.partition).encode()),
            (H_OFFSET, str(record.offset).encode()),
            (H_STAGE, stage.encode()),
            (H_CLASS, f"ckptlog.{rejection.reason}".encode()),
            (H_MESSAGE, rejection.message.encode()),
            (H_REASON, str(rejection.reason).encode()),
            (H_VERSION, __version__.encode()),
        ]
        return OutRecord(self.names.dlq, record.key, record.value, tuple(headers))

    def deletion_completed(self, run_id: str, paths: Sequence[str]) -> OutRecord:
        """Written back to this input partition so the fold drops the paths from `outstanding`."""
        value = encode_json(deletion_completed_event(run_id, paths))
        return OutRecord._make((self.pid.topic, self._run_pieces(run_id).key, value, _NO_HEADERS, self.pid.partition))

    def checkpoints_missing(self, run_id: str, missing: Sequence[str], restored_at: int) -> OutRecord:
        """Flag a run whose kept checkpoints are gone; the id names the restore point, not an input."""
        event_id = f"ckptlog:{self.pid.topic}:{self.pid.partition}:restored@{restored_at}:{run_id}"
        message = (
            f"run {run_id!r}: {len(missing)} kept checkpoint(s) not found in storage after restoring "
            f"{self.pid} at offset {restored_at}; restore them from a backup or report new checkpoints"
        )
        value = encode_json(
            envelope("checkpoints_missing", run_id, {"missing": list(missing), "message": message}, event_id)
        )
        return OutRecord(self.names.checkpoints, run_id.encode(), value)
