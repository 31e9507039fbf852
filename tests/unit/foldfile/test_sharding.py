"""Sharded `ckptlog fold` (runs split across processes) equals the single-process fold."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlog.processor import foldfile
from ckptlog.processor.core import FoldSettings
from ckptlog.processor.core.snapshot import canonical
from ckptlog.processor.foldfile import fold_file, fold_file_text, fold_lines
from ckptlog.processor.sharding import AMBIGUOUS, Shards, plan
from tests import factories as f
from tests.unit.core.test_fold_properties import logs


@pytest.mark.parametrize(
    "raw",
    [
        f.report("run-7"),
        f.started("run-7"),
        b'{"subject" :  "run-7", "x": 1}',
    ],
)
def test_route_matches_the_decoded_run(raw: bytes) -> None:
    assert Shards(5).route(raw) == Shards(5).of_run("run-7") == zlib.crc32(b"run-7") % 5


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b'{"subject": 3}',
        f.report("a\\u0062"),
        f.report("r", metrics={"subject": 1}),
        b'{"subj\\u0065ct": "x", "data": {"subject": "y"}}',
        b'{"subject": "unterminated',
    ],
)
def test_route_is_ambiguous_when_unsure(raw: bytes) -> None:
    assert Shards(3).route(raw) == AMBIGUOUS


@st.composite
def mixed_logs(draw: st.DrawFn) -> list[bytes]:
    lines = draw(logs(runs=("a", "b", "c", "d")))
    extras = [
        b"",
        b"garbage",
        f.report("e", metrics={"subject": "a"}),
        f.report("esc\\u00e9"),
        b'{"subj\\u0065ct": "a", "data": {}}',
        f.report("a", path="file:///elsewhere/x"),
    ]
    for extra in draw(st.lists(st.sampled_from(extras), max_size=4)):
        lines.insert(draw(st.integers(0, len(lines))), extra)
    return lines


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(mixed_logs(), st.integers(2, 3))
def test_sharded_fold_equals_single_fold(tmp_path: Path, lines: list[bytes], workers: int) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    config = FoldSettings(default_root="file:///data", outer_root="file:///data")
    single = fold_lines(path.read_bytes().splitlines(keepends=True), config)
    document, deletions = fold_file(path, config, workers=workers)
    assert canonical(document) == canonical(single.document())
    assert list(document["runs"]) == list(single.document()["runs"])  # runs in order of appearance
    assert sorted(deletions) == sorted(single.fold.owed())  # what the final state still owes (contract §9)
    assert json.loads(canonical(document))["rejected"] == single.rejected
    text, _ = fold_file_text(path, config, workers=workers)  # what `ckptlog fold` prints
    assert text == json.dumps(single.document())


def test_plan_balances_runs_by_their_lines() -> None:
    sample = [f.report(f"run-{i}") for i in range(10) for _ in range(3)] + [f.report("big")] * 12
    shards = plan(sample, 2)
    loads = [0, 0]
    for raw in sample:
        loads[shards.route(raw)] += 1
    assert loads == [21, 21]  # 'big' (12) alone with three small runs; CRC-32 alone gave 6/4 runs
    assert shards.of_run("big") == shards.route(f.report("big"))
    assert shards.of_run("never-seen") == zlib.crc32(b"never-seen") % 2  # outside the sample: CRC-32


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(mixed_logs())
def test_runs_missing_from_the_plan_sample_still_fold_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[bytes]
) -> None:
    monkeypatch.setattr(foldfile, "SAMPLE_BYTES", 300)  # the plan sees only the first line or two
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    config = FoldSettings(default_root="file:///data", outer_root="file:///data")
    single = fold_lines(path.read_bytes().splitlines(keepends=True), config)
    document, deletions = fold_file(path, config, workers=2)
    assert canonical(document) == canonical(single.document())
    assert sorted(deletions) == sorted(single.fold.owed())  # what the final state still owes (contract §9)


def test_an_eviction_settled_in_the_log_is_not_owed(tmp_path: Path) -> None:
    """Found by the property above on CI: `fold_file` returns what the final state owes, so an
    eviction whose deletion_completed is in the log is not among them, in one process or many."""

    def line(event_id: str, kind: str, data: str) -> bytes:
        head = f'{{"specversion":"1.0","id":"{event_id}","source":"t","type":"ckptlog.{kind}","subject":"c","data":'
        return (head + data + "}").encode()

    lines = [
        line("s", "run_started.v1", '{"storage_path":"file:///data/c","checkpoint_config":{"num_to_keep":1}}'),
        line("e1", "report.v1", '{"metrics":{"acc":0.1},"checkpoint":{"path":"file:///data/c/c1"}}'),
        line("e2", "report.v1", '{"metrics":{"acc":0.2},"checkpoint":{"path":"file:///data/c/c2"}}'),
        line("e3", "report.v1", '{"metrics":{"acc":0.3},"checkpoint":{"path":"file:///data/c/c3"}}'),
        line("d", "deletion_completed.v3", '{"deleted":[{"checkpoint_path":"file:///data/c/c2","eviction":1}]}'),
    ]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    config = FoldSettings(default_root="file:///data", outer_root="file:///data")
    single = fold_lines(path.read_bytes().splitlines(keepends=True), config)
    assert [d.path for d in single.deletions] == ["file:///data/c/c1", "file:///data/c/c2"]  # the history
    for workers in (1, 2):
        _, owed = fold_file(path, config, workers=workers)
        assert [(d.path, d.eviction) for d in owed] == [("file:///data/c/c1", 0)]


def _escaped_type(raw: bytes) -> bytes:
    """The same event with its type name JSON-escaped: `run\\u005fstarted` is `run_started`."""
    return raw.replace(b"run_started", b"run\\u005fstarted")


def _nesting_log(outer_line: bytes) -> list[bytes]:
    """Two runs whose roots nest: whichever run_started comes second must be refused, in any shard."""
    inner = [f.started("inner", root="file:///data/outer/inner", keep=1)]
    inner += [f.report("inner", path=f"file:///data/outer/inner/c{i}") for i in range(4)]
    outer = [outer_line] + [f.report("outer", path=f"file:///data/outer/c{i}") for i in range(4)]
    return [*outer, *inner]


@pytest.mark.parametrize(
    ("spelling", "limits"),
    [
        ("escaped type", {}),  # issue 20 #4: a byte search for run_started missed it
        ("deep validation kwargs", {"max_depth": 200}),  # the pre-scan decoded with the default depth
    ],
)
def test_nesting_roots_are_refused_alike_in_one_process_and_in_shards(
    tmp_path: Path, spelling: str, limits: dict[str, int]
) -> None:
    deep: object = 1
    for _ in range(80):
        deep = [deep]
    validation = {"fn_kwargs": {"deep": deep}, "timeout_s": None} if limits else None
    outer = f.started("outer", root="file:///data/outer", keep=1, validation=validation)
    lines = _nesting_log(_escaped_type(outer) if spelling == "escaped type" else outer)
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    config = FoldSettings(default_root="file:///data", outer_root="file:///data", **limits)  # type: ignore[arg-type]
    single = fold_lines(lines, config)
    assert [r["reason"] for r in single.rejected][:1] == ["unsafe_storage_root"]  # inner nests in outer
    shards = plan(lines, 2)
    assert shards.of_run("outer") != shards.of_run("inner")  # the two runs fold in different processes
    for workers in (2, 3):
        text, deletions = fold_file_text(path, config, workers=workers)
        assert text == json.dumps(single.document())
        assert sorted(deletions) == sorted(single.fold.owed())


def test_roots_nest_sees_equal_above_and_below_across_shards_only() -> None:
    a, b = ("file:///d/x", "a"), ("file:///d/x/y", "b")
    assert foldfile.roots_nest([[a], [b]]) and foldfile.roots_nest([[b], [a]])
    assert foldfile.roots_nest([[a], [("file:///d/x", "c")]])
    assert not foldfile.roots_nest([[a, b], [("file:///d/z", "c")]])  # nesting within one shard is its own
    assert not foldfile.roots_nest([[("file:///d/xy", "a")], [("file:///d/x", "b")]])  # a prefix, not a parent


def test_shards_fold_again_when_a_finished_record_may_have_expired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expiry spans runs (contract §3): with one record kept, b's retirement expires a's, so c may
    take a's root; a shard holding a and c but not b never sees that expiry. The shards fold again."""
    monkeypatch.setattr(foldfile, "SAMPLE_BYTES", 0)  # no plan: runs go by crc32
    names = [f"run-{i}" for i in range(40)]
    same = [n for n in names if zlib.crc32(n.encode()) % 2 == 0]
    a, c, b = same[0], same[1], next(n for n in names if zlib.crc32(n.encode()) % 2 == 1)
    lines = [f.started(a, "file:///data/a"), f.finished(a), f.started(b, "file:///data/b"), f.finished(b)]
    lines.append(f.started(c, "file:///data/a"))
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    config = FoldSettings(default_root="file:///data", outer_root="file:///data", finished_runs_kept=1)
    single = fold_lines(path.read_bytes().splitlines(keepends=True), config)
    assert list(single.document()["runs"]) == [c] and not single.document()["rejected"]
    document, _ = fold_file(path, config, workers=2)
    assert canonical(document) == canonical(single.document())
