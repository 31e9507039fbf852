"""What the service writes: routed envelopes, views, dead letters, deletion completions."""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import PosixPath
from types import SimpleNamespace

from ckptlog.events.codec import decode_event
from ckptlog.events.envelope import deletion_completed_event, encode_json, envelope, output_id
from ckptlog.events.outputs import CheckpointsMissing, OutputEnvelope
from ckptlog.events.rejections import Reason, Rejection
from ckptlog.kafka.records import OutRecord, PartitionId
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.outputs import Output
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.service.batch import BatchFolder
from ckptlog.processor.service.harness import workload
from ckptlog.processor.service.records import (
    H_MESSAGE,
    H_OFFSET,
    H_PARTITION,
    H_REASON,
    H_STAGE,
    H_TOPIC,
    RecordFactory,
    TopicNames,
)
from tests.unit.service.test_batch import records as input_records

NAMES = TopicNames("in", "ckpt", "val", "wm", "state", "dlq")
FACTORY = RecordFactory(NAMES, PartitionId("in", 2))


def test_outputs_are_routed_and_enveloped_with_replay_stable_ids() -> None:
    outs = [
        Output("checkpoint_registered", {"checkpoint_path": "p", "metrics": {"loss": math.nan}}),
        Output("validation_requested", {"checkpoint_path": "p"}),
        Output("watermark", {"committed": 1}),
    ]
    records: list = []
    FACTORY.outputs('run-"1"', 41, outs, records)
    assert [r.topic for r in records] == ["ckpt", "val", "wm"]
    assert all(r.key == b'run-"1"' for r in records)
    for record, (seq, out) in zip([records[0], records[1], records[2]], enumerate(outs), strict=False):
        assert record.value == encode_json(envelope(out.type, 'run-"1"', out.data, output_id("in", 2, 41, seq)))
        parsed = OutputEnvelope.model_validate_json(record.value)
        assert parsed.id == f"ckptlog:in:2:41:{seq}" and parsed.name == out.type


def test_encoding_keeps_non_finite_metrics() -> None:
    assert encode_json({"a": math.inf, "b": -math.inf}) == b'{"a":Infinity,"b":-Infinity}'
    assert math.isnan(json.loads(encode_json({"x": math.nan}))["x"])


def test_dead_letter_keeps_original_bytes_and_headers() -> None:
    record = SimpleNamespace(topic="in", partition=2, offset=7, key=b"k", value=b"\xff", headers=[("trace", b"1")])
    dead = FACTORY.dead_letter(record, Rejection(Reason.INVALID_UTF8, "not utf-8"), "decode")
    headers = dict(dead.headers)
    assert (dead.topic, dead.key, dead.value) == ("dlq", b"k", b"\xff")
    assert headers["trace"] == b"1"
    assert (headers[H_TOPIC], headers[H_PARTITION], headers[H_OFFSET]) == (b"in", b"2", b"7")
    assert (headers[H_REASON], headers[H_STAGE], headers[H_MESSAGE]) == (b"invalid_utf8", b"decode", b"not utf-8")


def test_deletion_completed_is_a_valid_input_event_for_the_same_partition() -> None:
    deleted = [("file:///r/run-1/c2", 4), ("file:///r/run-1/c1", 3)]
    refused = [("file:///r/run-1/c0", 1, "a symlink inside the path")]
    record = FACTORY.deletion_completed("run-1", deleted, refused)
    assert (record.topic, record.partition, record.key) == ("in", 2, b"run-1")
    event = decode_event(record.value, record.key)
    assert not isinstance(event, Rejection) and event.type == "ckptlog.deletion_completed.v3"
    assert [(e.checkpoint_path, e.eviction) for e in event.data.deleted] == deleted  # type: ignore[union-attr]
    assert [(e.checkpoint_path, e.eviction, e.reason) for e in event.data.refused] == refused  # type: ignore[union-attr]
    same_set = FACTORY.deletion_completed("run-1", deleted[::-1], refused)  # a retried send of the same confirmations
    assert decode_event(same_set.value).id == event.id and event.id.startswith("deleted:run-1:")  # type: ignore[union-attr]
    assert decode_event(FACTORY.deletion_completed("run-1", deleted[:1]).value).id != event.id  # type: ignore[union-attr]


def test_a_reused_path_deleted_again_is_not_a_duplicate_completion() -> None:
    """Issue 12 case 6: completion ids hashed the path set only, so the second deletion of a reused
    path (another eviction) was dropped as a duplicate and the path stayed owed forever."""
    first = decode_event(FACTORY.deletion_completed("run-1", [("file:///r/run-1/A", 0)]).value)
    second = decode_event(FACTORY.deletion_completed("run-1", [("file:///r/run-1/A", 5)]).value)
    assert not isinstance(first, Rejection) and not isinstance(second, Rejection)
    assert first.id != second.id


def test_checkpoints_missing_names_the_run_and_restore_point() -> None:
    record = FACTORY.checkpoints_missing("run-1", ["file:///a"], 99)
    parsed = OutputEnvelope.model_validate_json(record.value)
    data = CheckpointsMissing.model_validate(parsed.data)
    assert parsed.id == "ckptlog:in:2:restored@99:run-1" and data.missing == ["file:///a"]
    assert "run-1" in data.message and "in[2]" in data.message


def test_pre_encoded_envelopes_are_byte_identical_to_encoding_the_whole_event() -> None:
    """outputs() splices pre-encoded pieces; the result must be what encoding the
    whole dict gives, for escaped run ids, paths and topic names and for sequence numbers past the cache."""
    factory = RecordFactory(NAMES, PartitionId('in"\\é', 3))
    outs = [Output("watermark", {"committed": i}) for i in range(20)]
    for run_id in ('run-"1"\\é\n', "r"):
        records: list = []
        factory.outputs(run_id, 12345, outs, records)
        values = [r.value for r in records if r.topic == "wm"]
        assert values == [
            encode_json(envelope(o.type, run_id, o.data, output_id('in"\\é', 3, 12345, seq)))
            for seq, o in enumerate(outs)
        ]
        deleted = [("file:///r/c1", 0), ('file:///r/"c"\\1\té', 7)]
        record = factory.deletion_completed(run_id, deleted)
        assert record.value == encode_json(deletion_completed_event(run_id, deleted))
        assert (record.topic, record.partition, record.key) == ('in"\\é', 3, run_id.encode())


def test_fast_encoding_falls_back_to_literals_for_null_and_non_finite_values() -> None:
    """msgspec writes NaN/Infinity as null: anything with a null is encoded by pydantic-core instead,
    so the literals survive and a real None stays null; other values keep their value."""
    import pydantic_core

    exact = partial(pydantic_core.to_json, inf_nan_mode="constants")
    for value in (
        {"m": {"loss": math.nan, "x": [math.inf, -math.inf]}},
        {"error": None, "v": 1e16},
        {"path": "file:///null/c1"},
        {"big": 2**70, "s": 'é"\\\n\u2028', "f": 1e-7},
    ):
        assert json.loads(encode_json(value), parse_constant=str) == json.loads(exact(value), parse_constant=str)
    assert encode_json({"a": math.nan, "b": None}) == b'{"a":NaN,"b":null}'
    records: list = []
    FACTORY.outputs("r", 1, [Output("warning", {"metrics": {"loss": -math.inf}, "step": 2})], records)
    assert b'"data":{"metrics":{"loss":-Infinity},"step":2}}' in records[0].value
    assert encode_json({"p": PosixPath("/a")}) == b'{"p":"/a"}'  # a type only pydantic-core knows


def _enveloped(value: bytes) -> bytes:
    """`value` parsed and rebuilt with `envelope()` (checking its key order), then encoded with the one encoder."""
    parsed = json.loads(value)
    name, version = parsed["type"].removeprefix("ckptlog.").rsplit(".v", 1)
    rebuilt = envelope(name, parsed["subject"], parsed["data"], parsed["id"], version=int(version))
    assert list(parsed) == list(rebuilt)
    return encode_json(rebuilt)


def test_every_record_the_factory_builds_is_the_one_encoder_applied_to_the_envelope() -> None:
    """Fold outputs, completions and restore-time outputs all come from the one builder: each record's
    value is exactly `encode_json(envelope(...))`, also for run ids and topics holding `null` (which
    send the whole envelope down the exact path) and metrics with NaN, None and large exponents."""
    odd = ["run-0", 'null-run "q"\\é', "r\u2028"]
    for topic in ("in", "nullable"):
        factory = RecordFactory(TopicNames(topic, "c", "v", "w", "s", "d"), PartitionId(topic, 1))
        folder = BatchFolder(Fold(FoldSettings()), factory)
        lines = workload("file:///r", runs=3, reports=60, keep=1, validation_share=0.3)
        subject = b'"subject":' + json.dumps(odd[1], ensure_ascii=False).encode()
        lines = [line.replace(b'"subject":"run-1"', subject) for line in lines]
        built: list[OutRecord] = folder.fold_records(input_records(lines), 0).records
        for run_id in odd:
            factory.outputs(run_id, 7, [Output("warning", {"m": {"a": math.nan, "b": None, "c": 1e16}})], built)
            factory.outputs(run_id, 8, [Output("watermark", {"big": 1e300, "small": 1e-7})], built)
            built.append(factory.deletion_completed(run_id, [("file:///r/a", 0), ("file:///r/null", 1)]))
            built.append(factory.checkpoints_missing(run_id, ["file:///r/b"], 3))
        enveloped = [r for r in built if r.topic in ("c", "v", "w", topic)]
        assert len(enveloped) > 100 and any(odd[1].encode() == r.key for r in enveloped)
        for record in enveloped:
            assert record.value is not None
            assert record.value == _enveloped(record.value), record.value
