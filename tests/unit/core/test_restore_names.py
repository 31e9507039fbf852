"""Issue 42 item 4: a snapshot restore must not change what a rejection says (contract §6-7: the
state after a restart equals a clean replay, and so do its outputs). A restore rebuilds the roots
index from the runs table and a run's `by_key` in score order, not in the order the log made them;
when several runs' roots (or several live checkpoints) nest with what an event names, the one the
rejection names must not depend on that order: it is the smallest."""

from __future__ import annotations

from ckptlog.events.decoded import CheckpointConfig
from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.core.snapshot import decode, encode, of_fold
from tests import factories as f

SETTINGS = FoldSettings(
    default_config=CheckpointConfig(num_to_keep=2), default_root="file:///s", outer_root="file:///s"
)


def _messages(before: list[bytes], after: list[bytes]) -> tuple[list[str], list[str]]:
    """The rejections `after` gets from a clean fold of the whole log, and from a fold restored
    from a snapshot of `before` (encoded and decoded, as the service does)."""
    clean = Fold(SETTINGS)
    for line in before:
        clean.apply(f.event(line))
    snapshot = decode(encode(of_fold(clean, "in", 0, len(before))))
    restored = Fold(
        snapshot.settings,
        snapshot.runs,
        refused=snapshot.refused,
        finished=snapshot.finished,
        retired=snapshot.retired,
    )
    out: tuple[list[str], list[str]] = ([], [])
    for line in after:
        for fold, messages in zip((clean, restored), out, strict=True):
            rejection = fold.apply(f.event(line)).rejection
            messages.append("" if rejection is None else rejection.message)
    return out


def test_a_root_nesting_with_two_runs_names_the_same_run_after_a_restore() -> None:
    """The issue's log: implicit run b (a metrics-only report), c started at /s/c, b started at its
    implicit root /s/b (re-registered, so after c in registration order), then a at /s, above both."""
    before = [
        f.report("b", {"step": 1}, None),
        f.started("c", "file:///s/c"),
        f.started("b", "file:///s/b"),
    ]
    clean, restored = _messages(before, [f.started("a", "file:///s")])
    assert clean == restored
    assert "nests with the storage root of run 'b'" in clean[0], clean


def test_an_implicit_root_above_two_runs_names_the_same_run_after_a_restore() -> None:
    before = [f.report("x", {"step": 1}, None), f.started("z", "file:///s/q/z"), f.started("x", "file:///s/q/x")]
    clean, restored = _messages(before, [f.report("q", {"step": 1}, None)])  # implicit root /s/q: above both
    assert clean == restored and "run 'x'" in clean[0], clean


def test_a_path_above_two_kept_checkpoints_names_the_same_one_after_a_restore() -> None:
    """by_key is report order in a clean fold, score order after a restore."""
    before = [
        f.started("r", "file:///s/r", keep=3, attr="acc"),
        f.report("r", {"acc": 0.9}, "file:///s/r/d/c1"),
        f.report("r", {"acc": 0.1}, "file:///s/r/d/c2"),
    ]
    clean, restored = _messages(before, [f.report("r", {"acc": 0.5}, "file:///s/r/d")])
    assert clean == restored and "file:///s/r/d/c1" in clean[0], clean
