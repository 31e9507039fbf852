"""Snapshot codec: canonical, checksummed, versioned; decode(encode(s)) == s."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptlog.errors import SnapshotCorrupt, SnapshotVersionError
from ckptlog.events.decoded import CheckpointConfig, ValidationSpec
from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.core.snapshot import SCHEMA_VERSION, Snapshot, canonical, decode, encode, of_fold
from tests import factories as f


def sample() -> Snapshot:
    fold = Fold(FoldSettings(default_root="file:///d", dedup_window=16, max_payload_bytes=4096, max_depth=9))
    for raw in (
        f.started("r", "file:///d/r", keep=2, attr="acc", validation={"fn_kwargs": {"k": 1}, "timeout_s": 5}),
        f.report("r", {"acc": math.nan, "nested": {"x": [1, 2]}}, "file:///d/r/a", validation=True),
        f.report("r", {"acc": 1}, "file:///d/r/b"),
        f.report("r", {"acc": 2}, "file:///d/r/c"),
        f.report("r", {"acc": 3}, "file:///d/r/d"),
        f.restart("r"),
        f.report("implicit", {"acc": math.inf}, "file:///d/implicit/e"),
    ):
        assert fold.apply(f.event(raw)).rejection is None
    refused = fold.apply(f.event(f.started("bad", "file:///d/r/inner")))  # nests with run r's root
    assert refused.rejection is not None and refused.rejection.reason == "unsafe_storage_root"
    return of_fold(fold, "ckptlog.events", 3, 42)


def test_round_trip_is_exact() -> None:
    snap = sample()
    data = encode(snap)
    back = decode(data)
    assert encode(back) == data
    assert (back.topic, back.partition, back.next_offset) == ("ckptlog.events", 3, 42)
    assert back.settings == snap.settings
    run = back.runs["r"]
    assert run.latest is not None and run.latest.path == "file:///d/r/d"
    assert list(run.pending) == ["file:///d/r/a"] and run.generation == 1
    assert run.outstanding  # b was evicted and not yet confirmed deleted
    assert run.seen.foreign_set == set(run.seen.foreign) and len(run.seen.foreign) == 6
    assert back.refused == snap.refused and list(back.refused) == ["bad"]  # a refused run stays refused
    assert (back.settings.max_payload_bytes, back.settings.max_depth) == (4096, 9)
    assert back.runs["implicit"].storage_root == "file:///d/implicit"


def _as_version_2(data: bytes) -> bytes:
    """The same state as a schema version 2 snapshot wrote it: no `refused`, no decode limits."""
    outer = json.loads(data)
    body = outer["snapshot"]
    del body["refused"]
    del body["settings"]["max_payload_bytes"], body["settings"]["max_depth"]
    digest = hashlib.sha256(canonical(body)).hexdigest()
    return canonical(
        {"checksum": f"sha256:{digest}", "format": "ckptlog.snapshot", "schema_version": 2, "snapshot": body}
    )


@pytest.mark.parametrize("implicit", [False, True])
def test_a_version_2_snapshot_is_refused_with_the_command_that_rebuilds_it(implicit: bool) -> None:
    """Version 2 folded under older rules (implicit runs shared --storage-root; refused runs left no
    trace), which a clean replay under this build's may not give: never resumed, whatever it holds."""
    fold = Fold(FoldSettings(default_root="file:///d"))
    run, path = ("old", "file:///d/old/a") if implicit else ("r", "file:///d/r/a")
    if not implicit:
        assert fold.apply(f.event(f.started("r", "file:///d/r", keep=1))).rejection is None
    assert fold.apply(f.event(f.report(run, {}, path))).rejection is None
    with pytest.raises(SnapshotVersionError, match=r"schema version 2 .*ckptlog replay --snapshots NEW_URL"):
        decode(_as_version_2(encode(of_fold(fold, "t", 0, 2))))


def test_encoding_is_canonical_json() -> None:
    data = encode(sample())
    outer = json.loads(data)
    assert outer["schema_version"] == SCHEMA_VERSION and outer["checksum"].startswith("sha256:")
    assert data == canonical(outer)  # sorted keys, no whitespace
    assert b"NaN" in data and b"Infinity" in data


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],
        lambda b: b.replace(b'"report_count":4', b'"report_count":5'),
        lambda b: b"",
        lambda b: b"\xff" + b,
        lambda b: json.dumps({"hello": 1}).encode(),
    ],
)
def test_damage_is_detected(damage: object) -> None:
    data = encode(sample())
    with pytest.raises(SnapshotCorrupt):
        decode(damage(data))  # type: ignore[operator]


def test_future_schema_version_is_refused() -> None:
    outer = json.loads(encode(sample()))
    outer["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(SnapshotVersionError, match="upgrade ckptlog"):
        decode(canonical(outer))


PINNED: dict[str, Any] = {
    "next_offset": 0,
    "partition": 0,
    "processor_version": "v",
    "runs": {
        "r": {
            "checkpoints": [
                {
                    "key": "file:///d/r/a",
                    "metrics": {"acc": 1},
                    "path": "file:///d/r/a",
                    "report_index": 0,
                    "status": "PENDING_VALIDATION",
                    "preserved": None,
                    "validation": {"fn_kwargs": {"k": 1}, "timeout_s": 5.0},
                },
                {
                    "key": "file:///d/r/b",
                    "metrics": {"acc": 2},
                    "path": "file:///d/r/b",
                    "report_index": 1,
                    "status": "PENDING_VALIDATION",
                    "preserved": None,
                    "validation": {"fn_kwargs": {"n": None}, "timeout_s": 1.0},
                },
            ],
            "config": {
                "checkpoint_score_attribute": "acc",
                "checkpoint_score_order": "max",
                "num_to_keep": 2,
                "keep_every_n_steps": None,
                "step_attribute": None,
                "keep_time_interval_s": None,
            },
            "default_validation": {"fn_kwargs": {"k": 1}, "timeout_s": 5.0},
            "generation": 0,
            "index_in_generation": 2,
            "evictions": 0,
            "latest": "file:///d/r/b",
            "outstanding": [],
            "pending": ["file:///d/r/a", "file:///d/r/b"],
            "preserved_at": None,
            "finished": None,
            "reopened": 0,
            "report_count": 2,
            "dedup": {"applied": 3, "marks": [], "foreign": ["s", "a", "b"]},
            "started": {
                "checkpoint_config": {
                    "checkpoint_score_attribute": "acc",
                    "checkpoint_score_order": "max",
                    "num_to_keep": 2,
                    "keep_every_n_steps": None,
                    "step_attribute": None,
                    "keep_time_interval_s": None,
                },
                "storage_path": "file:///d/r",
                "validation": {"fn_kwargs": {"k": 1}, "timeout_s": 5.0},
            },
            "storage_root": "file:///d/r",
        }
    },
    "refused": {},
    "finished": {},
    "symlinked": {},
    "retired": {},
    "settings": {
        "dedup_window": 4096,
        "finished_runs_kept": 10_000,
        "max_depth": 64,
        "max_payload_bytes": 1048576,
        "default_config": {
            "checkpoint_score_attribute": "loss",
            "checkpoint_score_order": "min",
            "num_to_keep": 3,
            "keep_every_n_steps": None,
            "step_attribute": None,
            "keep_time_interval_s": None,
        },
        "default_root": "file:///d",
        "default_validation": {"fn_kwargs": {"split": ["val", 1]}, "timeout_s": 2.5},
        "outer_root": None,
    },
    "topic": "t",
}


def test_configs_and_specs_are_written_as_ever() -> None:
    """The bytes of configs, validation specs and run_started data, as snapshots written before
    they became msgspec Structs (pydantic's `model_dump`) held them: old snapshots still verify
    and restore to equal states."""
    settings = FoldSettings(
        default_config=CheckpointConfig(num_to_keep=3, checkpoint_score_attribute="loss", checkpoint_score_order="min"),
        default_root="file:///d",
        default_validation=ValidationSpec(fn_kwargs={"split": ["val", 1]}, timeout_s=2.5),
    )
    fold = Fold(settings)
    spec = {"fn_kwargs": {"k": 1}, "timeout_s": 5}
    for raw in (
        f.started("r", "file:///d/r", keep=2, attr="acc", validation=spec, event_id="s"),
        f.report("r", {"acc": 1}, "file:///d/r/a", validation=True, event_id="a"),
        f.report("r", {"acc": 2}, "file:///d/r/b", validation={"fn_kwargs": {"n": None}, "timeout_s": 1}, event_id="b"),
    ):
        assert fold.apply(f.event(raw)).rejection is None
    data = encode(Snapshot("t", 0, 0, fold.settings, fold.runs, "v"))
    written = canonical(json.loads(data)["snapshot"], sort_keys=True)
    assert written == canonical(PINNED, sort_keys=True)  # 5.0 stays 5.0, not 5
    back = decode(data)
    assert back.settings == settings and back.runs["r"].started == fold.runs["r"].started


def test_the_settings_alone_decode_to_what_the_whole_snapshot_holds() -> None:
    """`decode_settings` (what a history replay from the log start folds with) reads the same
    settings as `decode`, and refuses what `decode` refuses as not a snapshot."""
    from ckptlog.errors import SnapshotCorrupt
    from ckptlog.processor.core.snapshot import decode_settings

    settings = FoldSettings(default_root="file:///data", outer_root="file:///data", dedup_window=7, max_depth=9)
    data = encode(Snapshot("in", 0, 5, settings))
    assert decode_settings(data) == decode(data).settings == settings
    for bad in (b"", b"{}", data.replace(b'"ckptlog.snapshot"', b'"other"'), data[:40]):
        with pytest.raises(SnapshotCorrupt):
            decode_settings(bad)


def _written_by_json_dumps(snap: Snapshot) -> bytes:
    """`snap` as ckptlog 0.2 wrote it: every byte by `json.dumps` (floats as Python's repr, `1.5e-07`)."""

    def dumps(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode()

    body = json.loads(encode(snap))["snapshot"]
    head = {"checksum": "sha256:" + hashlib.sha256(dumps(body)).hexdigest(), "format": "ckptlog.snapshot"}
    return dumps({**head, "schema_version": SCHEMA_VERSION, "snapshot": body})


def _with_big_floats() -> Snapshot:
    """A state whose metrics spell differently under json.dumps and pydantic-core, and are not ASCII."""
    fold = Fold(FoldSettings(default_root="file:///d"))
    assert fold.apply(f.event(f.started("r", "file:///d/r", keep=1, attr="acc"))).rejection is None
    for n, acc in enumerate((1e-05, -2e300, 1.5e-07)):  # the kept one (keep=1) the last
        raw = f.report("r", {"acc": acc, "note": "Genauigkeit \u00fc\u00df \U0001f680"}, f"file:///d/r/c{n}")
        assert fold.apply(f.event(raw)).rejection is None
    return of_fold(fold, "t", 0, 4)


def test_the_encoding_differs_from_json_dumps_where_floats_do() -> None:
    """Why the decoder checks the bytes as written: a re-encoding by json.dumps would not match."""
    snap = _with_big_floats()
    assert encode(snap) != _written_by_json_dumps(snap)
    assert b"1.5e-7," in encode(snap) and b"1.5e-07," in _written_by_json_dumps(snap)


def test_a_snapshot_written_by_json_dumps_still_restores() -> None:
    """Snapshots of ckptlog 0.2 and earlier (json.dumps) restore to the same state, re-encoded alike."""
    snap = _with_big_floats()
    old = _written_by_json_dumps(snap)
    assert encode(decode(old)) == encode(snap)
    with pytest.raises(SnapshotCorrupt, match="checksum mismatch"):
        decode(old.replace(b"1.5e-07", b"2.5e-07"))


def test_a_snapshot_reformatted_by_hand_still_restores_and_damage_inside_it_is_caught() -> None:
    snap = _with_big_floats()
    pretty = json.dumps(json.loads(encode(snap)), indent=2, ensure_ascii=True).encode()
    assert encode(decode(pretty)) == encode(snap)
    with pytest.raises(SnapshotCorrupt, match="checksum mismatch"):
        decode(pretty.replace(b'"report_count": 3', b'"report_count": 2'))


def test_a_body_that_is_not_last_is_checked_by_its_encoding() -> None:
    """A layout the encoder never writes (the body first) is checked by encoding the body again."""
    data = encode(sample())
    outer = json.loads(data)
    moved = json.dumps({"snapshot": outer.pop("snapshot"), **outer}, separators=(",", ":"), allow_nan=True).encode()
    assert encode(decode(moved)) == data


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@given(JSON)
def test_a_snapshot_is_parsed_to_what_json_loads_gives(value: Any) -> None:
    """`parsed` (msgspec, json.loads where msgspec refuses) reads every document as json.loads does:
    NaN and Infinity literals, lone surrogates, huge ints, -0.0 and key order included."""
    from ckptlog.processor.core.snapshot import parsed

    for data in (canonical(value), json.dumps(value).encode(), json.dumps({"k": value, "n": [value]}).encode()):
        got, want = parsed(data), json.loads(data)
        assert json.dumps(got) == json.dumps(want) and repr(got) == repr(want)


def test_duplicate_keys_keep_the_last_value_as_json_loads_does() -> None:
    from ckptlog.processor.core.snapshot import parsed

    data = b'{"a":1,"b":2,"a":3}'
    assert parsed(data) == json.loads(data) and list(parsed(data)) == list(json.loads(data))
