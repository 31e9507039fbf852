"""Replay one input partition for a few runs only: exact, and far cheaper than folding every run.

Runs are independent in the fold but for one rule: no two runs' storage roots may nest (contract
§9). So the target runs are folded in a fold of their own (`fold`, every record of theirs,
outputs on), and the partition's other runs in a second one (`context`) that sees only the
records that can register or release a root: a run's records until it has state, and any record
that may be a run_started or run_forgotten (a byte search for `ckptlog.run_`, and any record with
a backslash, which could spell the type with escapes: a false hit only costs a decode). A
report of a run that has state never touches a root, so it is skipped without being decoded.

If no root the one fold registered or looked up nests with one the other did, every nesting
check gave the answer a fold of the whole partition would have (the argument of the sharded
`ckptlog fold`, ckptlog/processor/foldfile.py) — and, since no split fold sees when a finished record
expires (contract §3), no more runs can have retired than `finished_runs_kept`; `exact()` says
so, and otherwise the caller replays again
with `whole=True`: one fold sees every record (slower, always exact).

Pure: records in (anything with key, value, offset and timestamp), steps and states out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from ckptlog.events.codec import decode_event
from ckptlog.events.decoded import DecodedEvent, RootRefused, RunForgotten
from ckptlog.events.rejections import Reason, Rejection
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.snapshot import Snapshot
from ckptlog.processor.core.state import FoldSettings, RunState
from ckptlog.processor.explain.story import Step, effects_of, rejected, step_of
from ckptlog.processor.foldfile import roots_nest

_MAY_TOUCH_ROOTS = b"ckptlog.run_"  # run_started, run_forgotten (and run_finished, run_reopened: harmless extras)


class InputRecord(Protocol):
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int | None: ...


def _split(snapshot: Snapshot | None, settings: FoldSettings, runs: set[str], inside: bool) -> Fold:
    """A fold of the snapshot's runs that are (`inside`) or are not in `runs`."""
    if snapshot is None:
        return Fold(settings, emit=inside, root_history=True)

    def pick(table: dict[str, object]) -> set[str]:
        return {run_id for run_id in table if (run_id in runs) == inside}

    state = {r: snapshot.runs[r] for r in pick(dict(snapshot.runs))}
    refused = {r: snapshot.refused[r] for r in pick(dict(snapshot.refused))}
    finished = {r: snapshot.finished[r] for r in pick(dict(snapshot.finished))}
    symlinked = {r: snapshot.symlinked[r] for r in pick(dict(snapshot.symlinked))}
    retired = {r: snapshot.retired[r] for r in pick(dict(snapshot.retired))}
    return Fold(
        settings,
        state,
        emit=inside,
        refused=refused,
        finished=finished,
        symlinked=symlinked,
        retired=retired,
        root_history=True,
    )


class RunReplay:
    """Fold `records` of one partition for `runs`, from a snapshot (or the log start). It folds into
    the snapshot's run states: a second replay needs a snapshot decoded again, not the same one."""

    def __init__(
        self, settings: FoldSettings, runs: Iterable[str], snapshot: Snapshot | None = None, *, whole: bool = False
    ) -> None:
        self.runs = set(runs)
        self.whole = whole
        self.settings = snapshot.settings if snapshot is not None else settings
        if whole:
            self.fold = Fold(
                self.settings,
                dict(snapshot.runs) if snapshot else None,
                refused=dict(snapshot.refused) if snapshot else None,
                finished=dict(snapshot.finished) if snapshot else None,
                symlinked=dict(snapshot.symlinked) if snapshot else None,
                retired=dict(snapshot.retired) if snapshot else None,
            )
            self.context: Fold | None = None
        else:
            self.fold = _split(snapshot, self.settings, self.runs, inside=True)
            self.context = _split(snapshot, self.settings, self.runs, inside=False)
        self.finished_before = len(snapshot.finished) if snapshot is not None else 0
        self._keys = {run_id.encode() for run_id in self.runs}
        self._settled: set[bytes] = set()  # other runs' keys with state in the context fold
        self.steps: dict[str, list[Step]] = {run_id: [] for run_id in self.runs}
        self.last: dict[str, RunState] = {}  # each run's state after its last event (a retired run's too)
        self.position = snapshot.next_offset if snapshot is not None else 0
        self.folded = 0  # records decoded and folded (either fold)

    def feed(self, records: Iterable[InputRecord]) -> None:
        """Fold a batch of the partition's records, in offset order (the hot loop: nearly every
        record is another run's report, skipped after a set lookup and two byte searches)."""
        keys, settled, whole, target, other = self._keys, self._settled, self.whole, self._target, self._other
        last = None
        for record in records:
            last = record
            key, value = record.key, record.value
            if key in keys or key is None:
                target(record)
            elif whole:
                self._fold_other(self.fold, record)
            elif key not in settled or value is None or _MAY_TOUCH_ROOTS in value or b"\\" in value:
                other(key, record)
        if last is not None:
            self.position = last.offset + 1

    def _other(self, key: bytes, record: InputRecord) -> None:
        """Another run's record that may register or release a root: into the context fold."""
        context = self.context
        assert context is not None
        run_id = self._fold_other(context, record)
        if run_id is not None and (
            run_id in context.runs
            or run_id in context.refused
            or run_id in context.finished
            or run_id in context.symlinked
        ):
            self._settled.add(key)
        else:
            self._settled.discard(key)

    def exact(self) -> bool:
        """Whether the split folds gave what one fold of every run would have (module docstring)."""
        if self.context is None:
            return True
        retired = self.finished_before + self.fold.finishes + self.context.finishes  # a bound (contract §3)
        if retired > self.settings.finished_runs_kept:  # a finished record may have expired: only one fold knows
            return False
        return not roots_nest([self.fold.roots.history or [], self.context.roots.history or []])

    def state(self, run_id: str) -> RunState | None:
        """The run's state now: in the hot state, or as it left it (finished and settled; not forgotten)."""
        return self.fold.runs.get(run_id) or self.last.get(run_id)

    def _decode(self, record: InputRecord) -> DecodedEvent | Rejection:
        if record.value is None:
            return Rejection(Reason.INVALID_ENVELOPE, "record has no value (a tombstone)")
        limits = self.settings
        return decode_event(record.value, record.key, max_bytes=limits.max_payload_bytes, max_depth=limits.max_depth)

    def _fold_other(self, fold: Fold, record: InputRecord) -> str | None:
        event = self._decode(record)
        if isinstance(event, Rejection):
            return None
        self.folded += 1
        fold.apply(event)
        return event.subject

    def _target(self, record: InputRecord) -> None:
        event = self._decode(record)
        if isinstance(event, Rejection):
            if record.key is None:  # a keyless record: whose it is cannot be known, so it is not one of ours
                return
            run_id = record.key.decode("utf-8", "replace")
            if run_id in self.steps:
                effect = rejected(event, "decode")
                self.steps[run_id].append(step_of(record.offset, record.timestamp, None, [effect]))
            return
        if event.subject not in self.runs:  # keyless, another run's: it can touch roots like any other
            if not self.whole and self.context is not None:
                self._fold_other(self.context, record)
            else:
                self._fold_other(self.fold, record)
            return
        self.folded += 1
        effects = self.fold.apply(event)
        run_id = event.subject
        run = self.fold.runs.get(run_id) or self.fold.leaving.get(run_id)
        if isinstance(event, RunForgotten | RootRefused) and effects.rejection is None and run_id not in self.fold.runs:
            self.last.pop(run_id, None)  # its state is gone: the processor tombstones its VIEW (contract §3, §9)
        elif run is not None:
            self.last[run_id] = run
        self.steps[run_id].append(step_of(record.offset, record.timestamp, event, effects_of(event, effects)))
