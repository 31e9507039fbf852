"""Pure URL arithmetic behind storage confinement."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptlog.events.paths import (
    UnsafePath,
    canonical_below,
    fast_key,
    is_canonical_below,
    is_within,
    key_of,
    normalize,
    parse_url,
)
from ckptlog.processor.core.state import root_prefix


@pytest.mark.parametrize(
    "root, path, inside",
    [
        ("file:///data/r", "file:///data/r/c1", True),
        ("/data/r", "file:///data/r/c1", True),
        ("file:///data/r/", "/data//r/./c1/", True),
        ("file:///data/r", "file:///data/r", False),
        ("file:///data/r", "file:///data/rr/c1", False),
        ("file:///data/r", "s3://data/r/c1", False),
        ("s3://bucket/runs", "s3://bucket/runs/r/c", True),
        ("s3://bucket/runs", "S3://bucket/runs/r/c", True),
        ("file:///data/r", "file:///data/r/../x", False),
        ("memory://a", "memory://a/b", True),
    ],
)
def test_is_within(root: str, path: str, inside: bool) -> None:
    assert is_within(root, path) is inside


def test_dotdot_and_empty_are_unsafe() -> None:
    for bad in ("", "  ", "file:///a/../b", "../x", "s3://b/.."):
        with pytest.raises(UnsafePath):
            parse_url(bad)


def test_normalize_spellings() -> None:
    assert normalize("/a//b/") == normalize("file:///a/b") == normalize("local:///a/./b") == "file:///a/b"
    assert normalize("s3://bucket/k") == "s3://bucket/k"


SEGMENT = st.sampled_from(["a", "b", "", ".", "..", ".h", "c.d", "x y"])


@given(
    st.sampled_from(["", "file://", "s3://", "S3://", "memory://", "local://"]),
    st.lists(SEGMENT, max_size=5),
    st.booleans(),
    st.booleans(),
)
def test_fast_key_agrees_with_full_parse(proto: str, segments: list[str], lead: bool, trail: bool) -> None:
    url = proto + ("/" if lead else "") + "/".join(segments) + ("/" if trail else "")
    fast = fast_key(url)
    try:
        slow: str | None = key_of(parse_url(url))
    except UnsafePath:
        slow = None
    if fast is not None:
        assert fast == slow, url


def test_doubled_slash_right_after_the_root_is_not_a_canonical_key() -> None:
    own_key = canonical_below(root_prefix("file:///data/r"))
    assert not own_key("file:///data/r//a")  # found by hypothesis
    assert own_key("file:///data/r/a")
    assert not own_key("file:///data/r/.x") and not own_key("file:///data/r/a/") and not own_key("file:///data/r/")


def test_root_prefix_matches_only_below_the_root() -> None:
    prefix = root_prefix("file:///data/r/")
    assert normalize("/data/r/c").startswith(prefix)
    assert not normalize("/data/rr/c").startswith(prefix)
    assert not "anything".startswith(root_prefix(None))


@settings(max_examples=400)
@given(
    st.sampled_from(["file:///data/r", "/data/r", "s3://b/r", "memory://m"]),
    st.sampled_from(["file://", "", "s3://", "memory://", "FILE://"]),
    st.lists(SEGMENT, max_size=5),
    st.booleans(),
)
def test_fold_fast_path_only_accepts_canonical_paths_below_the_root(
    root: str, proto: str, segments: list[str], trail: bool
) -> None:
    prefix = root_prefix(root)
    own_key = canonical_below(prefix)
    for base in (root, proto + "/data/r", proto + "b/r"):
        path = base + "/" + "/".join(segments) + ("/" if trail else "")
        assert bool(is_canonical_below(prefix, path)) == bool(own_key(path)), path  # the restore's form of it
        if own_key(path):
            assert path == normalize(path) and is_within(root, path), path
