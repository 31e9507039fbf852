"""Sharded `ckptlog fold` (runs split across processes) equals the single-process fold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from processor.core import FoldSettings
from processor.core.snapshot import canonical
from processor.foldfile import fold_file, fold_lines
from processor.sharding import AMBIGUOUS, route, shard_of
from tests import factories as f
from tests.unit.test_fold_properties import logs


@pytest.mark.parametrize("raw", [
    f.report("run-7"), f.started("run-7"), b'{"subject" :  "run-7", "x": 1}',
])
def test_route_matches_the_decoded_run(raw: bytes) -> None:
    assert route(raw, 5) == shard_of("run-7", 5)


@pytest.mark.parametrize("raw", [
    b"", b"not json", b'{"subject": 3}', f.report("a\\u0062"), f.report("r", metrics={"subject": 1}),
    b'{"subj\\u0065ct": "x", "data": {"subject": "y"}}', b'{"subject": "unterminated',
])
def test_route_is_ambiguous_when_unsure(raw: bytes) -> None:
    assert route(raw, 3) == AMBIGUOUS


@st.composite
def mixed_logs(draw: st.DrawFn) -> list[bytes]:
    lines = draw(logs(runs=("a", "b", "c", "d")))
    extras = [b"", b"garbage", f.report("e", metrics={"subject": "a"}), f.report("esc\\u00e9"),
              b'{"subj\\u0065ct": "a", "data": {}}', f.report("a", path="file:///elsewhere/x")]
    for extra in draw(st.lists(st.sampled_from(extras), max_size=4)):
        lines.insert(draw(st.integers(0, len(lines))), extra)
    return lines


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
@given(mixed_logs(), st.integers(2, 3))
def test_sharded_fold_equals_single_fold(tmp_path: Path, lines: list[bytes], workers: int) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    config = FoldSettings(default_root="file:///data", outer_root="file:///data")
    single = fold_lines(path.read_bytes().splitlines(keepends=True), config)
    document, deletions = fold_file(path, config, workers=workers)
    assert canonical(document) == canonical(single.document())
    assert list(document["runs"]) == list(single.document()["runs"])  # runs in order of appearance
    assert sorted(deletions) == sorted(single.deletions)
    assert json.loads(canonical(document))["rejected"] == single.rejected
