"""Deletion safety across runs and partitions (contract §9, "The rule across runs"), attacked by hypothesis.

tests/unit/test_deletion_safety.py attacks one run; the failures issue 20 found were between
runs. Here two folds (two input partitions) share one `--storage-root` on a real directory
tree, with four runs spread over them, implicit and started. Each run's job reports checkpoints
of its own, and every run also plays the attacker: it reports another run's root, a directory
above another run's checkpoint, another run's kept checkpoint, the storage root, paths through
a symlink below the storage root that leads outside it, and starts with roots that nest with
other runs' (which the other partition cannot see). The processor claims each registered root
(claims, ckptlog/processor/storage/claim_writer.py) as the service does after a commit, and its
real `Deleter` deletes what each fold owes, folding the completions back; folds are restored
from snapshot bytes now and then.

After every step: every kept, latest and pending checkpoint of every run of both partitions
still holds what its job wrote; nothing outside the storage root changed; and after a drain,
no eviction is still owed (each was deleted, or refused with nothing touched).

`CKPTLOG_TEST_CROSS_RUN_EXAMPLES=20000 pytest tests/unit/test_cross_run_safety.py` runs the long
version (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ckptlog.events.codec import decode_event
from ckptlog.events.decoded import CheckpointConfig
from ckptlog.events.paths import UnsafePath, normalize
from ckptlog.events.rejections import Rejection
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.snapshot import decode, encode, of_fold
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.storage.claim_writer import claim_all
from ckptlog.processor.storage.claims import Claimant
from ckptlog.processor.storage.deletion import Deleter, Key, RetryPolicy
from tests import factories as f
from tests.unit.storage.test_deletion_symlinks import tree

EXAMPLES = int(os.environ.get("CKPTLOG_TEST_CROSS_RUN_EXAMPLES", "60"))
pytestmark = pytest.mark.timeout(max(300, EXAMPLES // 5))
RUNS = ["a", "b", "c"]
ROOT_CHOICES = ["own", "bound", "above-other", "inside-other", "other", "link", "other-sub"]
PATH_CHOICES = ["new", "new", "new", "other-kept", "inside-other", "above-other-kept", "other-root", "bound", "link"]


class CrossRunSafety(RuleBasedStateMachine):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.base = Path(tempfile.mkdtemp(prefix="ckptlog-cross-"))
        self.storage = self.base / "runs"
        self.outside = self.base / "outside"
        self.counter = 0
        self.written: dict[str, bytes] = {}  # canonical key -> what a job wrote there

    def teardown(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    @initialize(last=st.integers(0, 1), keep=st.sampled_from([1, 1, 2, None]))
    def start(self, last: int, keep: int | None) -> None:
        partitions = [0, 1, last]  # a and b never share a partition: what the fold cannot see
        (self.outside / "victim").mkdir(parents=True)
        (self.outside / "victim/model.bin").write_bytes(b"outside")
        self.storage.mkdir()
        (self.storage / "link").symlink_to(self.outside, target_is_directory=True)
        self.bound = f"file://{self.storage}"
        self.settings = FoldSettings(
            default_config=CheckpointConfig(num_to_keep=keep), default_root=self.bound, outer_root=self.bound
        )
        self.folds = [Fold(self.settings), Fold(self.settings)]
        for fold in self.folds:
            fold.roots.fresh = []  # the service claims what each committed batch registered
        self.partition = dict(zip(RUNS, partitions, strict=True))
        self.before_outside = tree(self.outside)

    # -- helpers -------------------------------------------------------------------------

    def fold_of(self, run: str) -> Fold:
        return self.folds[self.partition[run]]

    def root_of(self, run: str) -> str:
        """The run's registered root, or the one it would get as an implicit run."""
        state = self.fold_of(run).runs.get(run)
        return normalize(state.storage_root) if state is not None and state.storage_root else f"{self.bound}/{run}"

    def kept_paths(self, run: str) -> list[str]:
        state = self.fold_of(run).runs.get(run)
        return [] if state is None else [r.key for r in state.by_key.values()]

    def apply(self, run: str, raw: bytes) -> Any:
        """Fold one event on the run's partition, then claim the roots it registered (as the
        service does once the batch commits)."""
        decoded = decode_event(raw)
        fold = self.fold_of(run)
        effects = decoded if isinstance(decoded, Rejection) else fold.apply(decoded)
        claims = fold.roots.claimed()
        if claims:
            source = f"p{self.partition[run]}"
            claim_all([(root, Claimant(owner, source)) for root, owner in claims], self.bound, {})
        return effects

    def pick(self, choice: str, run: str, other: str, n: int) -> str:
        other_kept = self.kept_paths(other)
        return {
            "new": f"{self.root_of(run)}/c{n}",
            "other-root": self.root_of(other),
            "other-kept": other_kept[n % len(other_kept)] if other_kept else self.root_of(other),
            "above-other-kept": other_kept[n % len(other_kept)].rsplit("/", 1)[0] if other_kept else self.bound,
            "inside-other": f"{self.root_of(other)}/c{n}",
            "bound": self.bound,
            "link": f"{self.bound}/link/{run}/c{n}",
        }[choice]

    def job_writes(self, key: str) -> None:
        """The job saves its checkpoint before reporting it: a new real directory, never through a
        link and never over something that exists (the attacker's reports write nothing)."""
        target = Path(key.removeprefix("file://"))
        if os.path.lexists(target) or not str(target).startswith(str(self.storage) + "/"):
            return
        if any(p.is_symlink() for p in [target, *target.parents] if str(p).startswith(str(self.storage))):
            return
        self.counter += 1
        target.mkdir(parents=True)
        content = f"ckpt {self.counter}".encode()
        (target / "model.bin").write_bytes(content)
        self.written[key] = content

    # -- the jobs, the attackers, the controllers ----------------------------------------

    @rule(run=st.sampled_from(RUNS), other=st.sampled_from(RUNS), choice=st.sampled_from(ROOT_CHOICES))
    def run_started(self, run: str, other: str, choice: str) -> None:
        root = {
            "own": f"{self.bound}/{run}",
            "other": self.root_of(other),
            "inside-other": f"{self.root_of(other)}/{run}",
            "above-other": self.root_of(other).rsplit("/", 1)[0],
            "bound": self.bound,
            "link": f"{self.bound}/link/{run}",
            "other-sub": f"{self.bound}/{other}/sub/{run}",
        }[choice]
        effects = self.apply(run, f.started(run, root=root, keep=1, attr="acc"))
        why = effects if isinstance(effects, Rejection) else effects.rejection
        event(f"run_started {choice}: {why.reason if why else 'accepted'}")

    @rule(
        run=st.sampled_from(RUNS),
        other=st.sampled_from(RUNS),
        choice=st.sampled_from(PATH_CHOICES),
        n=st.integers(0, 5),
        score=st.floats(0, 1),
        validate=st.booleans(),
    )
    def report(self, run: str, other: str, choice: str, n: int, score: float, validate: bool) -> None:
        path = self.pick(choice, run, other, n)
        try:
            key = normalize(path)
        except UnsafePath:
            key = path
        if choice == "new":
            self.job_writes(key)
        effects = self.apply(run, f.report(run, {"acc": score}, path, validation=validate))
        why = effects if isinstance(effects, Rejection) else effects.rejection
        event(f"report {choice}: {why.reason if why else 'duplicate' if effects.duplicate else 'accepted'}")

    @rule(run=st.sampled_from(RUNS), data=st.data(), status=st.sampled_from(["VALIDATED", "VALIDATION_FAILED"]))
    def validate(self, run: str, data: st.DataObject, status: str) -> None:
        state = self.fold_of(run).runs.get(run)
        if state is None or not state.pending:
            return
        path = data.draw(st.sampled_from([r.path for r in state.pending.values()]))
        self.apply(run, f.result(run, path, status, {"acc": data.draw(st.floats(0, 1))}))

    @rule(run=st.sampled_from(RUNS))
    def restart(self, run: str) -> None:
        self.apply(run, f.restart(run))

    # -- the processor: deletions, restores ----------------------------------------------

    @rule(partition=st.integers(0, 1))
    def delete_owed(self, partition: int) -> None:
        fold = self.folds[partition]
        done, refused = asyncio.run(self.drain(fold, f"p{partition}"))
        for run_id in {key[0] for key in done} | {key[0] for key, _ in refused}:
            owed = fold.runs[run_id].outstanding
            deleted = [(p, owed[normalize(p)].eviction) for r, p in done if r == run_id]
            refusals = [(p, owed[normalize(p)].eviction, why) for (r, p), why in refused if r == run_id]
            self.apply(run_id, f.settled(run_id, deleted=deleted, refused=refusals))
        event(f"deletions: {'some' if done else 'none'} deleted, {'some' if refused else 'none'} refused")
        for _, why in refused:
            event(
                "refused: "
                + (
                    "another run's claim"
                    if "holds the claim of run" in why
                    else "a symlink"
                    if "symlink" in why
                    else why
                )
            )
        for _, path in done:
            assert not os.path.lexists(normalize(path).removeprefix("file://")), f"{path} confirmed but still there"
            self.written.pop(normalize(path), None)  # gone: reported there again, nothing of a job's is there
        owed_now = [d.path for d in fold.owed()]
        assert not owed_now, f"owed but neither deleted nor refused: {owed_now}"

    async def drain(self, fold: Fold, source: str) -> tuple[list[Key], list[tuple[Key, str]]]:
        done: list[Key] = []
        refused: list[tuple[Key, str]] = []

        def recheck(key: Key) -> str | None:
            state = fold.runs.get(key[0])
            owed = state is not None and normalize(key[1]) in state.outstanding
            return None if owed and normalize(key[1]) not in state.by_key else "not owed"  # type: ignore[union-attr]

        deleter = Deleter(
            outer_root=self.bound,
            on_done=done.extend,
            on_refused=refused.extend,
            recheck=recheck,
            retry=RetryPolicy(max_attempts=1),
        )
        deleter.submit_many(fold.owed(), source)
        await deleter.drain(timeout=10)
        await deleter.close()
        return done, refused

    @rule(partition=st.integers(0, 1))
    def restore(self, partition: int) -> None:
        """A crash and restore of one partition: its state comes back from snapshot bytes, and
        every root it holds is claimed again (as at catch-up)."""
        snapshot = decode(encode(of_fold(self.folds[partition], "t", partition, 0)))
        fold = Fold(snapshot.settings, snapshot.runs, refused=snapshot.refused)
        fold.roots.fresh = []
        self.folds[partition] = fold
        claims = [(root, Claimant(owner, f"p{partition}")) for root, owner in fold.roots.owners.items()]
        claim_all(claims, self.bound, {})

    # -- invariants ----------------------------------------------------------------------

    @precondition(lambda self: hasattr(self, "folds"))
    @invariant()
    def every_live_checkpoint_of_every_run_holds_what_its_job_wrote(self) -> None:
        for fold in self.folds:
            for state in fold.runs.values():
                live = {*state.by_key, *state.pending}
                for key in live:
                    if key not in self.written:
                        continue  # reported by an attacker, or never written: nothing of a job's to protect
                    model = Path(key.removeprefix("file://")) / "model.bin"
                    assert model.is_file(), f"run {state.run_id!r}: live checkpoint {key} is gone"
                    assert model.read_bytes() == self.written[key], f"run {state.run_id!r}: {key} was overwritten"

    @precondition(lambda self: hasattr(self, "folds"))
    @invariant()
    def nothing_outside_the_storage_root_changed(self) -> None:
        assert tree(self.outside) == self.before_outside


CrossRunSafety.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestCrossRunSafety = CrossRunSafety.TestCase
