"""Every output kind, as the fold and the service build it, is what its published schema says
(issue 26 item 3). The property tests check every output of their random logs the same way
(tests/unit/core/published.py); here a fixed corpus reaches every kind the fold emits, so a kind
no log happens to produce cannot slip through, and the whole envelope is held to
schemas/output-event.schema.json (type and version included)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from ckptlog.events.codec import decode_event
from ckptlog.events.outputs import CHECKPOINTS_MISSING, OUTPUTS
from ckptlog.events.rejections import Rejection
from ckptlog.events.schema import SCHEMAS
from ckptlog.kafka.records import OutRecord, PartitionId
from ckptlog.processor.core import Fold
from ckptlog.processor.core.outputs import Output
from ckptlog.processor.service.records import RecordFactory, TopicNames
from tests.unit.core import published
from tests.unit.corpus.golden import logs

NAMES = TopicNames("in", "ckpt", "val", "wm", "state", "dlq")
EVENT_SCHEMA = Draft202012Validator(json.loads((SCHEMAS / "output-event.schema.json").read_text()))


def corpus_outputs() -> list[tuple[str, list[Output]]]:
    """(run id, outputs) of every applied event of every golden log, folded as the processor folds."""
    out = []
    for case in logs().values():
        fold = Fold(case.folding)
        for line in case.content.splitlines():
            event = decode_event(line, max_bytes=case.max_bytes, max_depth=case.max_depth)
            if not isinstance(event, Rejection):
                effects = fold.apply(event)
                if effects.outputs:
                    out.append((event.subject, list(effects.outputs)))
    return out


@pytest.fixture(scope="module")
def outputs() -> list[tuple[str, list[Output]]]:
    return corpus_outputs()


def test_every_output_the_fold_emits_on_the_corpus_is_as_published(outputs: list[tuple[str, list[Output]]]) -> None:
    for _, emitted in outputs:
        published.check(emitted)


def test_the_corpus_reaches_every_kind_the_fold_emits(outputs: list[tuple[str, list[Output]]]) -> None:
    """Every row of the output table but the one the service makes (checkpoints_missing, below)."""
    seen = {output.type for _, emitted in outputs for output in emitted}
    assert seen == set(OUTPUTS) - {CHECKPOINTS_MISSING.name}


def envelope_problems(record: OutRecord) -> list[str]:
    body: dict[str, Any] = json.loads(record.value)
    kind = OUTPUTS[body["type"].split(".")[1]]
    found = [error.message for error in EVENT_SCHEMA.iter_errors(body)]
    if body["type"] != kind.type:
        found.append(f"type {body['type']} is not the table's {kind.type}")
    if record.topic != NAMES.route(kind.name):
        found.append(f"{kind.name} went to {record.topic}")
    return found


def test_the_first_record_of_each_kind_is_a_valid_output_event(outputs: list[tuple[str, list[Output]]]) -> None:
    factory = RecordFactory(NAMES, PartitionId("in", 0))
    first: dict[str, OutRecord] = {}
    for offset, (run_id, emitted) in enumerate(outputs):
        records: list[OutRecord] = []
        factory.outputs(run_id, offset, emitted, records)
        for output, record in zip(emitted, records, strict=True):
            first.setdefault(output.type, record)
    first[CHECKPOINTS_MISSING.name] = factory.checkpoints_missing("r", ["file:///data/r/c1"], 7)
    assert set(first) == set(OUTPUTS)
    for name, record in first.items():
        assert envelope_problems(record) == [], name
        published.check([(name, json.loads(record.value)["data"])])


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("watermark", {"committed": 1, "validated": 0, "generation": 0}, "'index_in_generation' is a required"),
        ("watermark", {"committed": "1", "validated": 0, "generation": 0, "index_in_generation": 0}, "not of type"),
        ("checkpoint_evicted", {"checkpoint_path": "/a", "report_index": 1, "why": "x"}, "not declared"),
        ("checkpoint_vanished", {}, "no row in the output table"),
    ],
)
def test_the_check_catches_what_a_schema_would_refuse(name: str, data: dict[str, Any], expected: str) -> None:
    assert any(expected in problem for problem in published.problems(name, data))
