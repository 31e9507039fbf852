"""schemas/input-event.schema.json accepts exactly the input events the processor accepts.

Valid events of every type (with the optional fields: report `generation`, worker_group_restart
`generation`, deletion_completed v3, extension attributes, `time`) and hundreds of mutations of
them (each field removed, replaced by a value of every JSON type, an unknown key added, edge values
of every constraint) are decided by a JSON Schema 2020-12 validator and by the processor's codec;
the two must agree. What a schema cannot express is pinned in the last tests and listed in
docs/schemas.md.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from ckptlog.events.codec import decode_event
from ckptlog.events.rejections import Rejection
from ckptlog.events.schema import SCHEMAS, documents
from tests import factories as f

VALIDATOR = Draft202012Validator(json.loads((SCHEMAS / "input-event.schema.json").read_text()))
SAMPLES: list[Any] = [None, True, 0, -1, 1.5, "", "x", [], [1], {}, {"k": 1}]


def body(raw: bytes, **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(raw)
    doc.update(changes)
    return doc


VALID: list[dict[str, Any]] = [
    body(f.started()),
    body(f.started(keep=2, attr="val/acc", order="min", validation={"fn_kwargs": {"a": 1}, "timeout_s": 5})),
    body(f.report(metrics={"acc": 0.5, "nested": {"x": [1, None]}}, path="file:///data/r/c1")),
    body(f.report(path="s3://b/r/c2", validation=True, generation=3)),
    body(f.report(path="s3://b/r/c3", validation={"fn_kwargs": {}, "timeout_s": None}, generation=0)),
    body(f.report(), time="2026-01-31T12:00:00Z", datacontenttype="application/json", traceparent="00-ab"),
    body(f.result("r", "s3://b/r/c2", "VALIDATED", {"acc": 1}), time="2024-02-29 23:59:59.123456+05:30"),
    body(f.result("r", "s3://b/r/c2", "VALIDATION_FAILED", error="boom")),
    body(f.result("r", "s3://b/r/c2", "VALIDATION_TIMEOUT")),
    body(f.restart(num_workers=4)),
    body(f.restart(num_workers=1), data={"num_workers": 1, "reason": "oom", "generation": 2}),
    body(f.settled("r", deleted=[("s3://b/r/c1", 0)])),
    body(f.settled("r", refused=[("s3://b/r/c1", 3, "unsafe_path")])),
    body(f.settled("r", deleted=[("s3://b/r/c1", 0)], refused=[("s3://b/r/c2", 1, "symlink")]), subject="é" * 256),
]
EDGES: list[tuple[str, Any]] = [  # (dotted path, value) set on every event that has the path
    ("subject", "a" * 257),
    ("subject", "a\nb"),
    ("subject", "run\x7f"),
    ("specversion", "0.3"),
    ("type", "ckptlog.unknown.v1"),
    ("type", "ckptlog.report.v9"),
    ("datacontenttype", "text/plain"),
    ("time", "2026-02-29T00:00:00Z"),
    ("time", "2000-02-29T00:00:00Z"),
    ("time", "1900-02-29T00:00:00Z"),
    ("time", "2026-04-31T00:00:00Z"),
    ("time", "2026-01-31T12:00:60Z"),
    ("time", "2026-01-31T24:00:00Z"),
    ("time", "2026-01-31T12:00:00z"),
    ("time", "2026-01-31T12:00:00-23:59"),
    ("time", "2026-01-31T12:00:00+24:00"),
    ("time", "0000-01-01T00:00:00Z"),
    ("Upper", 1),
    ("under_score", 1),
    ("ext1", {"any": ["value"]}),
    ("data.checkpoint_config.num_to_keep", 0),
    ("data.checkpoint_config.checkpoint_score_order", "avg"),
    ("data.validation.timeout_s", 0),
    ("data.validation.timeout_s", 0.001),
    ("data.generation", 0),
    ("data.num_workers", 0),
    ("data.status", "OK"),
    ("data.deleted", []),
    ("data.refused", []),
    ("data.deleted", [{"checkpoint_path": "p", "eviction": -1}]),
    ("data.deleted", [{"checkpoint_path": "p", "eviction": None}]),
    ("data.deleted", [{"checkpoint_path": "p"}] * 1001),
]


def accepted_by_processor(doc: dict[str, Any]) -> bool:
    return not isinstance(decode_event(json.dumps(doc).encode()), Rejection)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*prefix, key)
            yield from paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield (*prefix, index)
            yield from paths(value, (*prefix, index))


def mutations(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each path removed and replaced by every sample; an unknown key added to every object."""
    for path in paths(doc):
        parent_path, last = path[:-1], path[-1]
        for replacement in [..., *SAMPLES]:
            mutated = copy.deepcopy(doc)
            parent = mutated
            for step in parent_path:
                parent = parent[step]
            if replacement is ...:
                del parent[last]
            else:
                parent[last] = replacement
            yield mutated
    for path in [(), *paths(doc)]:
        mutated = copy.deepcopy(doc)
        node = mutated
        for step in path:
            node = node[step]
        if isinstance(node, dict):
            node["unknown_field"] = 1
            yield mutated


def edges(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for dotted, value in EDGES:
        *parents, last = dotted.split(".")
        mutated = copy.deepcopy(doc)
        node = mutated
        if all(isinstance(node := node.get(p), dict) for p in parents):  # type: ignore[union-attr]
            if parents and last not in node and last not in ("generation", "timeout_s"):
                continue  # only edges of fields this type has (plus the optional ones)
            node[last] = value
            yield mutated


def cases() -> Iterator[dict[str, Any]]:
    for doc in VALID:
        yield doc
        yield from mutations(doc)
        yield from edges(doc)


def test_the_valid_corpus_is_valid() -> None:
    for doc in VALID:
        assert accepted_by_processor(doc), doc
        assert VALIDATOR.is_valid(doc), list(VALIDATOR.iter_errors(doc))


def test_schema_and_processor_agree_on_every_case() -> None:
    disagreements, total, rejected = [], 0, 0
    for doc in cases():
        total += 1
        processor, schema = accepted_by_processor(doc), VALIDATOR.is_valid(doc)
        rejected += not processor
        if processor != schema:
            disagreements.append((processor, schema, json.dumps(doc)[:300]))
    assert total > 1000 and rejected > total // 2
    assert not disagreements, f"{len(disagreements)} of {total} disagree, e.g. {disagreements[:5]}"


@pytest.mark.parametrize("spelling", ["2026-01-31", "2026-01-31T12:00:00", "2026-01-31T12:00:00,5Z", "20260131T1200Z"])
def test_known_difference_other_iso_8601_spellings_of_time(spelling: str) -> None:
    """The processor reads any ISO 8601 timestamp Python does; the schema asks for RFC 3339."""
    doc = body(f.report(), time=spelling)
    assert accepted_by_processor(doc) and not VALIDATOR.is_valid(doc)


def test_known_difference_integers_written_with_a_fraction() -> None:
    """JSON Schema counts 2.0 as an integer; the processor (strict) does not."""
    doc = body(f.restart(num_workers=2))
    doc["data"]["num_workers"] = 2.0
    assert not accepted_by_processor(doc) and VALIDATOR.is_valid(doc)


def test_every_output_type_has_an_event_schema() -> None:
    from ckptlog.events.outputs import OUTPUT_KINDS

    schema = documents()["output-event.schema.json"]
    types = {schema["$defs"][ref["$ref"].rsplit("/", 1)[1]]["properties"]["type"]["const"] for ref in schema["oneOf"]}
    assert types == {kind.type for kind in OUTPUT_KINDS}
    assert "ckptlog.checkpoint_evicted.v2" in types  # v2: `reason` is required
