"""A base writes the runs unchanged since the previous snapshot from the bytes kept (contract §6
*Encodings kept*, core/delta.py `Encodings`): byte for byte the base encoded from scratch, whatever
events, snapshots (bases, deltas), failed writes, abandoned captures and restores came before."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlog.processor.core import Fold
from ckptlog.processor.core.chain import Chain
from ckptlog.processor.core.delta import Capture, Encodings, decode_chain
from ckptlog.processor.core.snapshot import SCHEMA_VERSION, encode, of_fold, run_entry
from ckptlog.processor.service.restore import restored_fold
from tests import factories as f
from tests.unit.core.test_delta import lives
from tests.unit.core.test_fold_properties import ROOT, SETTINGS

ACTIONS = ("snap", "snap", "step", "step", "write", "write", "fail", "abandon", "restore", "restore-same")


def full(fold: Fold, offset: int) -> bytes:
    return encode(of_fold(fold, "t", 0, offset))


def assert_kept_is_current(kept: Encodings, fold: Fold) -> None:
    """The rule: an entry kept equals its run's entry now, unless the run is in `fold.changed`."""
    if kept._fold is not fold:
        return
    changed = fold.changed or {}
    for run_id, entry in kept._entries.items():
        if run_id not in changed:
            assert entry == run_entry(run_id, fold.runs[run_id]), run_id


class Partition:
    """One partition's fold and snapshots, as the scheduler drives them (one capture at a time)."""

    def __init__(self, fold_settings: Any) -> None:
        self.settings = fold_settings
        self.fold = Fold(fold_settings, track_changes=True)
        self.kept = Encodings()
        self.log: list[bytes] = []
        self.objects: list[bytes] = []
        self.chain: Chain | None = None
        self.capture: tuple[Capture, bytes] | None = None

    def snap(self, max_deltas: int | None) -> Capture | None:
        """Start a snapshot: a delta when the chain takes one (`max_deltas` None: a base)."""
        offset, chain = len(self.log), self.chain
        if self.capture is not None or (chain is not None and offset <= chain.tip_offset and max_deltas is not None):
            return None
        delta = chain is not None and max_deltas is not None and chain.takes_delta(max_deltas, SCHEMA_VERSION)
        capture = Capture(self.fold, "t", 0, offset, chain if delta else None, self.kept)
        self.capture = (capture, full(self.fold, offset))
        return capture

    def finish(self, written: bool) -> None:
        """Encode the rest and seal; then the write succeeds (the chain grows) or fails (`give_back`)."""
        assert self.capture is not None
        capture, expected = self.capture
        self.capture = None
        while capture.step():
            pass
        data = capture.encoded()
        capture.keep()
        objects = [*self.objects, data] if capture.is_delta else [data]
        if not capture.is_delta:
            assert data == expected  # the base from kept bytes is the base encoded from scratch
        restored = decode_chain(objects)
        assert encode(restored) == expected
        if written:
            self.objects, self.chain = objects, restored.chain
        else:
            capture.give_back()

    def abandon(self) -> None:
        """Cancelled while encoding (a revocation): let go of the fold, changes given back, entries kept."""
        assert self.capture is not None
        capture = self.capture[0]
        self.capture = None
        capture.release()
        capture.give_back()
        capture.keep()

    def restore(self, same_kept: bool) -> None:
        """A new fold from the written chain and the log after it (the processor's restart); its scheduler's
        entries are new (`same_kept`: the old ones, which must not be taken for another fold)."""
        if self.capture is not None:
            self.abandon()
        snapshot = decode_chain(self.objects) if self.objects else None
        fold = restored_fold(snapshot, self.settings, track=True)  # as the processor restores
        for raw in self.log[0 if snapshot is None else snapshot.next_offset :]:
            fold.apply(f.event(raw))
        assert full(fold, 0) == full(self.fold, 0)
        self.fold = fold
        if not same_kept:
            self.kept = Encodings()

    def act(self, action: str, max_deltas: int, same_kept: bool) -> None:
        """One snapshot step of a generated scenario (unknown actions: none), then the rule checked."""
        if action == "snap":
            self.snap(max_deltas)
        elif action == "step" and self.capture is not None:
            self.capture[0].step()
        elif action in ("write", "fail") and self.capture is not None:
            self.finish(written=action == "write")
        elif action == "abandon" and self.capture is not None:
            self.abandon()
        elif action.startswith("restore"):
            self.restore(same_kept=same_kept)
        assert_kept_is_current(self.kept, self.fold)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lives(),
    st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=120),
    st.integers(0, 3),
    st.integers(0, 2),
)
def test_a_base_from_kept_entries_is_the_base_encoded_from_scratch(
    lines: list[bytes], actions: list[str], max_deltas: int, kept: int
) -> None:
    partition = Partition(dataclasses.replace(SETTINGS, finished_runs_kept=kept))
    events = iter(lines)
    for action in actions:
        raw = next(events, None)
        if raw is not None:
            partition.fold.apply(f.event(raw))
            partition.log.append(raw)
        partition.act(action, max_deltas, same_kept=action == "restore-same")
    if partition.capture is not None:
        partition.finish(written=True)
    for again in (False, True):  # two bases in a row: the second takes every run's entry from the first's
        base = partition.snap(None)
        assert base is not None and (not again or not base._pending)
        partition.finish(written=True)
    assert len(partition.kept) == len(partition.fold.runs)


def test_a_base_encodes_only_the_runs_changed_since_the_previous_snapshot() -> None:
    fold = Fold(SETTINGS, track_changes=True)
    for run in ("a", "b", "c"):
        fold.apply(f.event(f.started(run, f"{ROOT}/{run}", event_id=f"s-{run}")))
    kept = Encodings()
    first = Capture(fold, "t", 0, 3, None, kept)
    assert len(first._pending) == 3
    while first.step():
        pass
    first.encoded()
    first.keep()
    assert len(kept) == 3
    fold.apply(f.event(f.report("b", {"x": 1}, f"{ROOT}/b/c1", event_id="r-b")))
    fold.apply(f.event(f.finished("c", event_id="f-c")))  # c leaves `runs`: its entry is not taken again
    second = Capture(fold, "t", 0, 5, None, kept)
    assert list(second._pending) == ["b"] and len(kept) == 0  # taken: none for a capture meanwhile
    assert Capture(Fold(SETTINGS, track_changes=True), "t", 0, 0, None, kept)._pending == {}
    while second.step():
        pass
    assert second.encoded() == full(fold, 5)
    second.keep()
    assert sorted(kept._entries) == ["a", "b"]


def test_a_fold_that_does_not_track_its_changes_keeps_no_entries() -> None:
    """Without `Fold.changed` nothing says which entries went stale: every base encodes every run."""
    fold = Fold(SETTINGS)
    fold.apply(f.event(f.started("a", f"{ROOT}/a", event_id="s-a")))
    kept = Encodings()
    for offset in (1, 2):
        capture = Capture(fold, "t", 0, offset, None, kept)
        assert list(capture._pending) == ["a"]
        while capture.step():
            pass
        assert capture.encoded() == full(fold, offset)
        capture.keep()
        assert len(kept) == 0
        fold.apply(f.event(f.report("a", {"x": offset}, event_id=f"r{offset}")))


def test_entries_kept_for_one_fold_are_not_taken_for_another() -> None:
    """Entries are of one fold: another one's runs (same ids, other states, nothing changed since its
    own last snapshot) are all encoded. A restored fold is another one too (its replay marks every run
    changed since the snapshot it was restored from, but the entries are not relied on for that)."""
    folds = [Fold(SETTINGS, track_changes=True) for _ in range(2)]
    for n, fold in enumerate(folds):
        fold.apply(f.event(f.started("a", f"{ROOT}/a", event_id="s-a")))
        fold.apply(f.event(f.report("a", {"x": n}, event_id=f"r{n}")))
    kept = Encodings()
    for fold, offset in zip(folds, (2, 2), strict=True):
        own = Capture(fold, "t", 0, offset, None)  # the fold's own last snapshot: nothing changed since
        while own.step():
            pass
    first = Capture(folds[0], "t", 0, 3, None, kept)
    while first.step():
        pass
    first.encoded()
    first.keep()
    assert len(kept) == 1 and folds[1].changed == {}
    other = Capture(folds[1], "t", 0, 3, None, kept)
    assert list(other._pending) == ["a"]
    while other.step():
        pass
    assert other.encoded() == full(folds[1], 3) != full(folds[0], 3)
