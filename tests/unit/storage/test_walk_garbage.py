"""A deletion walk leaves no reference cycles behind, whatever its outcome.

The processor collects the young generation only every 100,000 allocations (`tune_gc`), so
objects that only the cyclic collector can free pile up between collections, and each collection
then frees them all at once on the event loop. One cycle per deletion (a raised `Stop` kept in the
walk's table of reached roots: its traceback holds the frame that holds the table) made a
collection of ~100,000 objects every ~3 s at 1,000 deletions/s, 130-160 ms each: the latency tail
of bench.incremental_broker --only latency (p99 158-342 ms before, 79-98 ms after).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ckptlog.events.paths import CLAIM_DIR
from ckptlog.processor.storage.claims import Claimant, claim_body, claim_name
from ckptlog.processor.storage.safety import Outcome, Refused
from ckptlog.processor.storage.tree import remove_all

ME, OTHER = Claimant("r1", "t[0]"), Claimant("b", "t[1]")


@pytest.fixture
def no_automatic_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()  # a collection in the middle would free the cycles before the test counts them
    try:
        yield
    finally:
        gc.enable()


def _missing_root(root: Path) -> None:
    root.parent.mkdir(parents=True)


def _missing_checkpoints(root: Path) -> None:
    root.mkdir(parents=True)


def _present(root: Path) -> None:
    for name in ("a", "b"):
        (root / name / "sub").mkdir(parents=True)
        (root / name / "sub" / "w.bin").write_bytes(b"x")


def _another_runs_root(root: Path) -> None:
    _present(root)
    (root / CLAIM_DIR).mkdir()
    (root / CLAIM_DIR / claim_name(OTHER)).write_bytes(claim_body(OTHER))


def _root_is_a_file(root: Path) -> None:
    root.parent.mkdir(parents=True)
    root.write_bytes(b"not a directory")


CASES: dict[str, tuple[Callable[[Path], None], type[object] | None]] = {
    "the root is gone": (_missing_root, type(None)),
    "the checkpoints are gone": (_missing_checkpoints, type(None)),
    "deleted": (_present, type(None)),
    "the root is another run's": (_another_runs_root, Refused),
    "the root is a file": (_root_is_a_file, Refused),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_walk_leaves_no_cycles_for_the_collector(tmp_path: Path, case: str, no_automatic_gc: None) -> None:
    build, kind = CASES[case]
    root = tmp_path / "runs" / "r1"
    build(root)
    items = [(f"file://{root}/{name}", f"file://{root}", ME) for name in ("a", "b")]
    outcomes: list[Outcome] = remove_all(items, {})
    assert [type(outcome) for outcome in outcomes] == [kind, kind], outcomes
    del outcomes
    assert gc.collect() == 0, f"{case}: the walk left objects that only the cyclic collector frees"


def test_a_hostile_spelling_leaves_no_cycles_either(tmp_path: Path, no_automatic_gc: None) -> None:
    root = tmp_path / "runs" / "r1"
    root.mkdir(parents=True)
    (outcome,) = remove_all([(f"file://{root}/a/../../r2", f"file://{root}", ME)], {})
    assert isinstance(outcome, Refused)
    del outcome
    assert gc.collect() == 0
