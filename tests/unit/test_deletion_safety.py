"""Deletion safety (contract §9) end to end on a real directory tree, attacked by hypothesis.

A state machine plays a training job, an evaluator, an attacker and the processor's deleter
against one fold: reports with hostile path spellings (`::`, `..`, `.`, `//`, percent-escapes,
trailing slashes, case and Unicode look-alikes, relative paths), nesting in both orders, reuse
of deleted paths, validations, restarts, symlinks planted at every depth (to outside the run,
and to other checkpoints inside it), restores from a snapshot (which re-drive every outstanding
deletion through a new deleter) and deletions carried out by the real `Deleter` whose
completions are folded back. After every step:

- every kept, latest and pending checkpoint exists with the file its job wrote;
- nothing outside the run's root changed;
- after the deleter drained: every eviction it confirmed is gone from the tree, and no eviction
  is still owed (each was deleted, or refused: a symlink on the way, and then nothing was touched).

`CKPTLOG_TEST_SAFETY_EXAMPLES=100000 pytest tests/unit/test_deletion_safety.py` runs the long version
(docs/reliability.md reports its count).
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
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from ckptlog.events.codec import decode_event
from ckptlog.events.paths import UnsafePath, normalize
from ckptlog.events.rejections import Rejection
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.snapshot import Snapshot, decode, encode
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.storage.deletion import Deleter, Key, RetryPolicy
from tests import factories as f

EXAMPLES = int(os.environ.get("CKPTLOG_TEST_SAFETY_EXAMPLES", "150"))
pytestmark = pytest.mark.timeout(max(300, EXAMPLES // 10))  # the long run takes ~30 ms an example
RUN = "r1"
NAMES = [
    "A",
    "B",
    "C",
    "A/B",
    "A/B/C",
    "x",
    "x/y",
    "xy",
    "link",
    "link/victim",
    "deep/link/victim",
    "alias/model.bin",
    "::memory",
    "a::b",
    "%2e%2e",
    "%41",
    "..",
    "../r2/A",
    ".",
    "A/.",
    "A/..",
    "Ａ",
    "a",
    "A?x=1",
    "A#f",
    "A*",
    "[A]",
    "A\\B",
    "ü",
    "u\u0308",
]
#: The names where evictions, nesting, reuse and links meet: drawn as often as all the others.
CORE = ["A", "B", "A/B", "x", "x/y", "link", "link/victim", "alias/model.bin", "deep/link/victim"]
SPELLINGS = ["plain", "file", "double", "trailing", "dot", "relative", "upper-proto"]


class DeletionSafety(RuleBasedStateMachine):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.base = Path(tempfile.mkdtemp(prefix="ckptlog-safety-"))
        self.root = self.base / "runs" / RUN
        self.outside = self.base / "outside"
        self.counter = 0
        self.written: dict[str, bytes | None] = {}  # canonical key -> what the job wrote (None: nothing)
        self.reported_at: dict[str, int] = {}  # canonical key -> step of its last accepted report
        self.refused: set[str] = set()
        self.step = 0

    def teardown(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    @initialize(keep=st.sampled_from([1, 1, 2, None]), attr=st.sampled_from([None, "acc"]))
    def start(self, keep: int | None, attr: str | None) -> None:
        (self.outside / "victim").mkdir(parents=True)
        (self.outside / "victim/model.bin").write_bytes(b"outside")
        (self.base / "runs/r2/A").mkdir(parents=True)
        (self.base / "runs/r2/A/model.bin").write_bytes(b"other run")
        self.root.mkdir(parents=True, exist_ok=True)
        self.fold = Fold(FoldSettings(outer_root=f"file://{self.base}/runs"))
        self.before_outside = self.tree(self.outside) | {"r2": self.tree(self.base / "runs/r2")}
        self.apply(f.started(RUN, root=f"file://{self.root}", keep=keep, attr=attr))

    # -- helpers -------------------------------------------------------------------------

    def tree(self, top: Path) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for directory, dirs, files in os.walk(top, followlinks=False):
            for name in dirs + files:
                path = Path(directory) / name
                rel = str(path.relative_to(top))
                found[rel] = (
                    f"-> {os.readlink(path)}" if path.is_symlink() else path.read_bytes() if path.is_file() else 0
                )
        return found

    def apply(self, raw: bytes) -> Any:
        event = decode_event(raw)
        if isinstance(event, Rejection):
            return event
        return self.fold.apply(event)

    def spell(self, name: str, how: str) -> str:
        root = str(self.root)
        return {
            "plain": f"{root}/{name}",
            "file": f"file://{root}/{name}",
            "double": f"{root}//{name}",
            "trailing": f"{root}/{name}/",
            "dot": f"{root}/./{name}",
            "relative": f"{root.lstrip('/')}/{name}",
            "upper-proto": f"FILE://{root}/{name}",
        }[how]

    def inside(self, path: Path) -> bool:
        """`path` resolves to the run root or below it."""
        real, root = os.path.realpath(path), os.path.realpath(self.root)
        return real == root or real.startswith(root + "/")

    def via_symlink(self, target: Path) -> bool:
        """Whether `target` or a directory on the way to it from the root is a symlink."""
        path = target
        while path != self.root:
            if path.is_symlink():
                return True
            path = path.parent
        return False

    @property
    def run(self) -> Any:
        return self.fold.runs[RUN]

    # -- the job, the evaluator, the controller -----------------------------------------

    @rule(
        name=st.sampled_from(CORE) | st.sampled_from(CORE) | st.sampled_from(NAMES),
        how=st.sampled_from(["plain", "plain", *SPELLINGS]),
        score=st.floats(0, 1),
        validate=st.booleans(),
    )
    def report(self, name: str, how: str, score: float, validate: bool) -> None:
        self.step += 1
        self.counter += 1
        path = self.spell(name, how)
        try:
            key = normalize(path)
        except UnsafePath:
            key = None
        content: bytes | None = f"ckpt {self.counter}".encode()
        target = self.root / name
        if key is not None and self.inside(target) and target != self.root and not self.via_symlink(target):
            try:  # the job saves the checkpoint before it reports it (never over an existing one)
                target.mkdir(parents=True, exist_ok=True)
                model = target / "model.bin"
                if model.is_file():
                    content = model.read_bytes()
                else:
                    model.write_bytes(content)  # type: ignore[arg-type]
            except OSError:
                content = None  # e.g. a file where a directory should be: the report still goes out
        else:
            content = None  # the job writes real directories only; the attacker's links are not its own
        effects = self.apply(f.report(RUN, {"acc": score}, path, validation=validate))
        if isinstance(effects, Rejection) or effects.rejection is not None or effects.duplicate:
            why = effects if isinstance(effects, Rejection) else effects.rejection
            event(f"report refused: {why.reason if why else 'duplicate id'}")
            return
        assert key is not None, f"{path!r} was accepted, but it has no canonical spelling"
        self.written[key] = content
        self.reported_at[key] = self.step

    @rule(data=st.data(), status=st.sampled_from(["VALIDATED", "VALIDATION_FAILED"]), score=st.floats(0, 1))
    def validate(self, data: st.DataObject, status: str, score: float) -> None:
        self.step += 1
        pending = [r.path for r in self.run.pending.values()]
        if not pending:
            return
        path = data.draw(st.sampled_from(pending))
        self.apply(f.result(RUN, path, status, {"acc": score}))

    @rule()
    def restart(self) -> None:
        self.step += 1
        self.apply(f.restart(RUN))

    # -- the attacker --------------------------------------------------------------------

    @rule(at=st.sampled_from(["link", "deep/link", "alias", "A/link"]), outward=st.booleans())
    def plant_symlink(self, at: str, outward: bool) -> None:
        link = self.root / at
        if at == "deep/link" and not os.path.lexists(link.parent):
            link.parent.mkdir()  # a directory of the attacker's own, never one the job reported
        if os.path.lexists(link) or not link.parent.is_dir() or self.via_symlink(link.parent):
            return
        if f"file://{link}" in self.reported_at:
            return  # a name the job used: a link there would be the attacker re-creating a deleted checkpoint
        target = self.outside if outward else self.root / "A"
        link.symlink_to(target, target_is_directory=True)

    # -- the processor: deletions, restores -----------------------------------------------

    @rule()
    def delete_outstanding(self) -> None:
        """What the processor does once evictions are durable: the Deleter deletes, its
        confirmations are folded back as deletion_completed events."""
        self.step += 1
        done, refused = asyncio.run(self.drain())
        outstanding = self.run.outstanding
        deleted = [(path, outstanding[normalize(path)].eviction) for _, path in done]
        refusals = [(path, outstanding[normalize(path)].eviction, why) for (_, path), why in refused]
        if deleted or refusals:
            self.apply(f.settled(RUN, deleted=deleted, refused=refusals))
        event(f"deletions: {'some' if deleted else 'none'} deleted, {'some' if refusals else 'none'} refused")
        self.refused |= {normalize(path) for (_, path), _ in refused}
        for _, path in done:  # gone now (a later job may re-create a directory of that name)
            assert not os.path.lexists(normalize(path).removeprefix("file://")), f"{path!r} confirmed but still there"
        assert not self.run.outstanding, f"owed but neither deleted nor refused: {list(self.run.outstanding)}"

    async def drain(self) -> tuple[list[Key], list[tuple[Key, str]]]:
        done: list[Key] = []
        refused: list[tuple[Key, str]] = []

        def recheck(key: Key) -> str | None:
            run = self.fold.runs.get(key[0])
            live = run is not None and normalize(key[1]) in run.by_key
            owed = run is not None and normalize(key[1]) in run.outstanding
            return None if owed and not live else "not owed by the current state"

        deleter = Deleter(
            outer_root=f"file://{self.base}/runs",
            on_done=done.extend,
            on_refused=refused.extend,
            recheck=recheck,
            retry=RetryPolicy(max_attempts=1),
        )
        deleter.submit_many(self.fold.owed())
        await deleter.drain(timeout=10)
        await deleter.close()
        return done, refused

    @rule()
    def restore(self) -> None:
        """A crash and restore: the state comes back from its snapshot bytes."""
        snapshot = decode(encode(Snapshot("t", 0, self.step, self.fold.settings, self.fold.runs)))
        self.fold = Fold(snapshot.settings, snapshot.runs)

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def live_checkpoints_exist_with_their_files(self) -> None:
        if not hasattr(self, "fold"):
            return
        run = self.run
        live = [*run.checkpoints, *([run.latest] if run.latest else []), *run.pending.values()]
        for record in live:
            key = normalize(record.path)
            if self.written[key] is None:
                continue  # nothing of the job's there to protect (see `report`)
            model = Path(key.removeprefix("file://")) / "model.bin"
            assert model.is_file(), f"live checkpoint {record.path!r} is gone"
            assert model.read_bytes() == self.written[key], f"live checkpoint {record.path!r} was overwritten"

    @invariant()
    def nothing_outside_the_run_changed(self) -> None:
        if not hasattr(self, "fold"):
            return
        now = self.tree(self.outside) | {"r2": self.tree(self.base / "runs/r2")}
        assert now == self.before_outside


DeletionSafety.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestDeletionSafety = DeletionSafety.TestCase
