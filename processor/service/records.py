"""Everything the service writes, as `OutRecord`s: routed fold outputs, run views, dead letters
and the internal deletion_completed events.

Routing (see docs/processor.md): `validation_requested` -> validations topic; `watermark` ->
checkpoints topic AND watermarks topic; every other output -> checkpoints topic; the run VIEW
-> the compacted state topic. Keys are run ids. Output ids come from the input coordinates,
so a replay produces byte-identical records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from functools import partial

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
DELETION_COMPLETED = "ckptlog.deletion_completed.v1"
_NO_HEADERS: tuple[Header, ...] = ()

encode_json = partial(pydantic_core.to_json, inf_nan_mode="constants")
"""Compact UTF-8 JSON with NaN/Infinity literals, like events.outputs.encode_json (Python's json with
allow_nan) but ~4x faster; floats may be spelled differently (1e-7 vs 1e-07), never valued differently."""


_ID = b'{"specversion":"1.0","id":'
_DATA = b',"datacontenttype":"application/json","data":'
_HEADS: dict[str, bytes] = {}


def _head(name: str) -> bytes:
    head = _HEADS[name] = f',"source":"{PROCESSOR_SOURCE}","type":"ckptlog.{name}.v1","subject":'.encode()
    return head


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

    def outputs(self, run_id: str, offset: int, outputs: Sequence[Output], into: list[OutRecord]) -> None:
        """Append the envelopes of one applied event's outputs (sequence = index in `outputs`).

        Byte-identical to `encode_json(envelope(...))`, built from pre-encoded pieces (hot path)."""
        key = run_id.encode()
        subject = encode_json(run_id)
        names, topic, partition = self.names, self.pid.topic, self.pid.partition
        append = into.append
        for seq, out in enumerate(outputs):
            head = _HEADS.get(out.type) or _head(out.type)
            value = b"".join((_ID, encode_json(output_id(topic, partition, offset, seq)), head, subject, _DATA,
                              encode_json(out.data), b"}"))
            if out.type == "validation_requested":
                append(OutRecord(names.validations, key, value))
                continue
            append(OutRecord(names.checkpoints, key, value))
            if out.type == "watermark":
                append(OutRecord(names.watermarks, key, value))

    def view(self, run_id: str, view: View) -> OutRecord:
        return OutRecord(self.names.state, run_id.encode(), encode_json(view))

    def dead_letter(self, record: InputRecord, rejection: Rejection, stage: str) -> OutRecord:
        """The original key, value and headers plus Connect-style error headers."""
        headers: list[Header] = list(record.headers or ())
        headers += [(H_TOPIC, record.topic.encode()), (H_PARTITION, str(record.partition).encode()),
                    (H_OFFSET, str(record.offset).encode()), (H_STAGE, stage.encode()),
                    (H_CLASS, f"ckptlog.{rejection.reason}".encode()), (H_MESSAGE, rejection.message.encode()),
                    (H_REASON, str(rejection.reason).encode()), (H_VERSION, __version__.encode())]
        return OutRecord(self.names.dlq, record.key, record.value, tuple(headers))

    def deletion_completed(self, run_id: str, path: str) -> OutRecord:
        """Written back to this input partition so the fold drops the path from `outstanding`."""
        event = {"specversion": "1.0", "id": f"deleted:{run_id}:{path}", "source": PROCESSOR_SOURCE,
                 "type": DELETION_COMPLETED, "subject": run_id, "datacontenttype": "application/json",
                 "data": {"checkpoint_path": path}}
        return OutRecord(self.pid.topic, run_id.encode(), encode_json(event), partition=self.pid.partition)

    def checkpoints_missing(self, run_id: str, missing: Sequence[str], restored_at: int) -> OutRecord:
        """Flag a run whose kept checkpoints are gone; the id names the restore point, not an input."""
        event_id = f"ckptlog:{self.pid.topic}:{self.pid.partition}:restored@{restored_at}:{run_id}"
        message = (f"run {run_id!r}: {len(missing)} kept checkpoint(s) not found in storage after restoring "
                   f"{self.pid} at offset {restored_at}; restore them from a backup or report new checkpoints")
        value = encode_json(envelope("checkpoints_missing", run_id, {"missing": list(missing), "message": message},
                                     event_id))
        return OutRecord(self.names.checkpoints, run_id.encode(), value)
