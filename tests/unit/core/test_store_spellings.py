"""Issue 42, "also check": `//` or `/./` on an object store
names another key (contract §9). Each test fails where
`r//c1` is canonicalised to `r/c1` (a different, maybe kept, S3 object) before deletion."""

from __future__ import annotations

import pytest

from ckptlog.events.paths import UnsafePath, parse_url
from ckptlog.processor.core import Fold
from tests import factories as f
from tests.unit.core.test_spec_rules import apply, reason


@pytest.mark.parametrize(
    "path", ["s3://b/runs/r1//c1", "s3://b/runs/r1/./c1", "gs://b/runs/r1//c1/", "memory://m/r1//c1"]
)
def test_an_empty_or_dot_segment_off_local_files_is_an_unsafe_path(path: str) -> None:
    with pytest.raises(UnsafePath, match="empty or '.' segment"):
        parse_url(path)
    root = path.split("/r1/")[0] + "/r1"
    fold = Fold()
    assert reason(fold, f.started("r1", root, keep=1)) is None
    assert reason(fold, f.report("r1", {}, f"{root}/c1")) is None
    assert reason(fold, f.report("r1", {}, path)) == "unsafe_path"  # never an alias of the kept c1
    assert [c.path for c in fold.runs["r1"].checkpoints] == [f"{root}/c1"]


def test_local_files_keep_their_canonical_spelling() -> None:
    """On a local tree `a//b` and `a/./b` are `a/b` (the OS says so): accepted, compared canonically."""
    assert parse_url("/data/r//c1") == parse_url("file:///data/r/./c1") == parse_url("/data/r/c1")
    fold = Fold()
    apply(fold, f.started("r1", "file:///data/r", keep=1))
    assert reason(fold, f.report("r1", {}, "/data/r//c1")) is None
