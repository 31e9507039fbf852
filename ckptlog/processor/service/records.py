"""Everything the service writes, as `OutRecord`s: routed fold outputs, run views, dead letters
and the internal deletion_completed and root_refused events.

Every CloudEvents record (fold outputs, checkpoints_missing, deletion_completed, root_refused) is built by the
partition's `ckptlog.events.envelope.EnvelopeBuilder`, and every JSON value is `ckptlog.events.envelope.encode_json`:
one shape, one encoder. Routing (see docs/processor.md) is the `topic` of each output's row in the
output table (ckptlog/events/outputs.py `OUTPUT_KINDS`): `validation_requested` -> validations topic;
`watermark` -> watermarks topic; every other output -> checkpoints topic; the run VIEW -> the
compacted state topic. Keys are run ids. Output ids come from the input coordinates, so a
replay produces byte-identical records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ckptlog import __version__
from ckptlog.events.dead_letters import H_CLASS, H_MESSAGE, H_OFFSET, H_PARTITION, H_REASON, H_STAGE, H_TOPIC, H_VERSION
from ckptlog.events.envelope import (
    DELETION_COMPLETED,
    DELETION_COMPLETED_VERSION,
    ROOT_REFUSED,
    ROOT_REFUSED_VERSION,
    EnvelopeBuilder,
    Refused,
    Settled,
    deletion_completed_data,
    deletion_completed_id,
    restore_id,
    root_refused_data,
    root_refused_id,
)
from ckptlog.events.outputs import CHECKPOINTS_MISSING, OUTPUTS
from ckptlog.events.rejections import Rejection
from ckptlog.kafka.records import Header, InputRecord, OutRecord, PartitionId

if TYPE_CHECKING:
    from ckptlog.processor.service.settings import ServiceSettings

__all__ = [
    "H_CLASS",
    "H_MESSAGE",
    "H_OFFSET",
    "H_PARTITION",
    "H_REASON",
    "H_STAGE",
    "H_TOPIC",
    "H_VERSION",
    "RecordFactory",
    "TopicNames",
]  # the header names live in ckptlog/events/dead_letters.py
_NO_HEADERS: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicNames:
    input: str
    checkpoints: str
    validations: str
    watermarks: str
    state: str
    dlq: str

    @staticmethod
    def of(settings: ServiceSettings) -> TopicNames:
        """The six topics a processor with these settings reads and writes."""
        return TopicNames(
            settings.input_topic,
            settings.checkpoints_topic,
            settings.validations_topic,
            settings.watermarks_topic,
            settings.state_topic,
            settings.dlq_topic,
        )

    def route(self, name: str) -> str:
        """The topic of an output event, as its row in the output table says (a name without a row
        is a KeyError: an output no schema describes is never published)."""
        topic: str = getattr(self, OUTPUTS[name].topic)
        return topic

    def placement(self, name: str) -> tuple[str, int]:
        """An output's topic and version: what the envelope builder caches per run and type."""
        return self.route(name), OUTPUTS[name].version


class RecordFactory:
    """Builds the records of one input partition; every envelope comes from its `EnvelopeBuilder`."""

    def __init__(self, names: TopicNames, pid: PartitionId) -> None:
        self.names, self.pid = names, pid
        self.envelopes = EnvelopeBuilder(pid.topic, pid.partition, names.placement, OutRecord)
        self.outputs = self.envelopes.outputs
        """Append the records of one applied event's outputs (sequence = index in `outputs`), keyed by
        run and routed: `outputs(run_id, offset, outputs, into)`."""

    def dead_letter(self, record: InputRecord, rejection: Rejection, stage: str) -> OutRecord:
        """The original key, value and headers plus Connect-style error headers."""
        headers: list[Header] = list(record.headers or ())
        headers += [
            (H_TOPIC, record.topic.encode()),
            (H_PARTITION, str(record.partition).encode()),
            (H_OFFSET, str(record.offset).encode()),
            (H_STAGE, stage.encode()),
            (H_CLASS, (rejection.exception or f"ckptlog.{rejection.reason}").encode()),
            (H_MESSAGE, rejection.message.encode()),
            (H_REASON, str(rejection.reason).encode()),
            (H_VERSION, __version__.encode()),
        ]
        return OutRecord(self.names.dlq, record.key, record.value, tuple(headers))

    def deletion_completed(self, run_id: str, deleted: Settled, refused: Refused = ()) -> OutRecord:
        """Written back to this input partition so the fold settles these evictions."""
        value = self.envelopes.encode(
            DELETION_COMPLETED,
            run_id,
            deletion_completed_data(deleted, refused),
            deletion_completed_id(run_id, deleted, refused),
            DELETION_COMPLETED_VERSION,
        )
        return OutRecord(self.pid.topic, run_id.encode(), value, _NO_HEADERS, self.pid.partition)

    def root_refused(self, run_id: str, root: str, seen: str) -> OutRecord:
        """The fact that the run's root is reached through a symlink (contract §9 *Roots behind a
        symlink*), written to this input partition with the batch that registered the root."""
        value = self.envelopes.encode(
            ROOT_REFUSED, run_id, root_refused_data(root, seen), root_refused_id(run_id, root), ROOT_REFUSED_VERSION
        )
        return OutRecord(self.pid.topic, run_id.encode(), value, _NO_HEADERS, self.pid.partition)

    def checkpoints_missing(self, run_id: str, missing: Sequence[str], restored_at: int) -> OutRecord:
        """Flag a run whose kept checkpoints are gone; the id names the restore point, not an input."""
        message = (
            f"run {run_id!r}: {len(missing)} kept checkpoint(s) not found in storage after restoring "
            f"{self.pid} at offset {restored_at}; restore them from a backup or report new checkpoints"
        )
        event_id = restore_id(self.pid.topic, self.pid.partition, restored_at, run_id)
        data = {"missing": list(missing), "message": message}
        value = self.envelopes.encode(CHECKPOINTS_MISSING.name, run_id, data, event_id, CHECKPOINTS_MISSING.version)
        return OutRecord(self.names.route(CHECKPOINTS_MISSING.name), run_id.encode(), value)
