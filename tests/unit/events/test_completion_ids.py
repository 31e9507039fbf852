"""`deletion_completed_id` is a wire contract: the same evictions give the same id bytes, whatever
their order, in every build (the ids below were made by the build before its construction was
tuned; a change to them breaks deduplication of completions already in the log)."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from ckptlog.events.envelope import deletion_completed_id

PINNED = [
    (("run-1", [("file:///r/run-1/c2", 7), ("file:///r/run-1/c10", 3)], [("file:///r/run-1/c1", 1, "why")]),
     "deleted:run-1:1d81f1b050f449b396c3b432942aa369"),
    (("run-1", [("file:///r/run-1/c2", 7)], []), "deleted:run-1:9fbdd2c1822e358a47f3c37fa123315b"),
    (("r", [], []), "deleted:r:e3b0c44298fc1c149afbf4c8996fb924"),
]  # fmt: skip


def test_completion_ids_are_the_pinned_bytes() -> None:
    for (run_id, deleted, refused), expected in PINNED:
        assert deletion_completed_id(run_id, deleted, refused) == expected


def spelled_out(run_id: str, deleted: list[tuple[str, int]], refused: list[tuple[str, int, str]]) -> str:
    """The id as the contract reads: sorted entries, then sorted refusals, newline-joined, sha256, 32 hex."""
    entries = sorted(f"{p}\x00{e}" for p, e in deleted) + sorted(f"{p}\x00{e}\x00refused" for p, e, _ in refused)
    return f"deleted:{run_id}:{hashlib.sha256(chr(10).join(entries).encode()).hexdigest()[:32]}"


@given(
    st.text(min_size=1, max_size=8),
    st.lists(st.tuples(st.text(max_size=12), st.integers(0, 10**15)), max_size=6),
    st.lists(st.tuples(st.text(max_size=12), st.integers(0, 10**15), st.text(max_size=4)), max_size=3),
)
def test_completion_ids_equal_the_spelled_out_digest_in_any_order(
    run_id: str, deleted: list[tuple[str, int]], refused: list[tuple[str, int, str]]
) -> None:
    got = deletion_completed_id(run_id, deleted, refused)
    assert got == spelled_out(run_id, deleted, refused)
    assert deletion_completed_id(run_id, deleted[::-1], refused[::-1]) == got
