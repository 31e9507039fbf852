"""The whole-system test's streams (issue 20): valid runs mixed with hostile cases and their relatives.

A stream is a sequence of phases on one tree and one set of topics. `StreamGenerator.phase()` makes
the next phase from a *recipe*: the ingredients it mixes (`INGREDIENTS`) and the action to take
before its records are produced (`ACTIONS`: restarts, a rebalance, other limits, the other
evaluator). Recipes come from a seeded `random.Random` (`recipes`, printed seeds, shrunk by hand:
leave ingredients out with `CKPTLOG_TEST_SYSTEM_WITHOUT`) or from hypothesis (`tests/reliability/
test_whole_system.py` folds hypothesis-drawn recipes offline, where shrinking is cheap).

Every checkpoint's files are written before its report (`Phase.writes`, done by the runner), and
each run root gets a file of its own (`ROOT_FILE`) that no deletion may touch. Records carry
their partition (Kafka's murmur2 of the key, as the default partitioner would choose; keyless
garbage gets one drawn at random), so a stream puts runs on both partitions on purpose.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka.partitioner import murmur2

from tests.reliability import system_hostile as hostile

PARTITIONS = 2
MAX_DEPTH = 64
MAX_PAYLOAD_BYTES = 100_000
OTHER_MAX_DEPTH = 40  # the `limits` action restarts with this: the restore must refuse the snapshot
DEFAULT_KEEP = 2  # --default-num-to-keep: implicit runs evict too
FINISHED_KEPT = 3  # --finished-runs-kept: `expired_reuse` expires a finished run's record
ROOT_FILE = "ROOT.keep"
PAGED_MORE = 50
PAGED_LAST = 600
MODES = ("ok", "ok", "ok", "raise", "system_exit", "cancelled", "bad_str", "hang")
HOSTILE_MODES = "hostile_validation"
"""In CKPTLOG_TEST_SYSTEM_WITHOUT (a temporary switch): validation functions only succeed, raise an
Exception or hang (no BaseException, no bad __str__), while issue 20 #7 wedges the evaluator."""

INGREDIENTS = (
    "valid",  # started runs: scores, min/max, num_to_keep small and None, keep_every_n_steps
    "continue",  # more reports of runs already started
    "validations",  # reports asking for validation; every mode of the validation function
    "stray_results",  # validation_result for unknown runs, unknown paths, a typo'd subject
    "implicit",  # reports without run_started (folded under --storage-root)
    "cross_run",  # an implicit run reporting a started run's root, then evicting it
    "above",  # a run reporting a directory above another run's checkpoints, then evicting it
    "cross_partition",  # a run on the other partition whose root lies inside another run's checkpoint
    "adopt_implicit",  # a started run re-reporting an implicit run's kept path, then evicting it
    "refused",  # a refused run_started followed by more events of that run
    "symlink_root",  # a root through a link below --storage-root that leads outside it
    "reuse",  # a path reported, evicted, deleted (an earlier phase), reported again
    "paged",  # num_to_keep 300, 400 reports over two phases
    "escaped",  # escaped JSON spellings of the same events, a nesting root among them
    "deep",  # 20,000 levels deep, and just past --max-depth
    "large",  # past --max-payload-bytes
    "invalid_utf8",
    "garbage",  # not JSON, not an object, truncated, blank, tombstones, key mismatch
    "expired_reuse",  # a finished run's record expires; its id is started again in its root, old reports redelivered
    "reopened",  # a finished run, retired, is reopened (maybe after a restart) and evicts its old kept checkpoints
    "huge_scores",  # scores of ±10**400, flat and nested, ranking evictions; NaN; a kept run's huge step
)
ACTIONS = ("none", "sigterm", "sigkill", "rebalance", "limits", "evaluator", "damage")
FIRST_ACTIONS = ("none", "sigkill", "rebalance+evaluator", "limits+damage")  # every action in any 4 phases
"""An action is one of ACTIONS or several joined by `+`; `limits` restarts (SIGTERM) with other
limits, then again with the stream's own; `damage` kills the processor and loses or tears the
newest snapshot delta of each partition before it restarts (tests/reliability/snapshot_faults.py)."""


def partition_of(key: str) -> int:
    return int(murmur2(key.encode()) & 0x7FFFFFFF) % PARTITIONS


@dataclass(frozen=True)
class Line:
    """One input record: its value (None: a tombstone), key and partition."""

    value: bytes | None
    key: bytes | None
    partition: int


@dataclass
class Phase:
    number: int
    action: str
    ingredients: list[str]
    lines: list[Line] = field(default_factory=list)
    writes: list[tuple[str, str]] = field(default_factory=list)  # (run id, checkpoint dir) to create first
    root_files: list[str] = field(default_factory=list)  # run roots to give a ROOT_FILE
    validations: int = 0  # reports asking for validation


@dataclass
class RunModel:
    run_id: str
    partition: int
    root: str  # the directory its checkpoints go below
    started: bool
    keep: int | None
    order: str = "max"
    step: int = 0
    paths: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Recipe:
    action: str
    ingredients: tuple[str, ...]


def recipes(rng: random.Random, phases: int, without: Iterable[str] = ()) -> list[Recipe]:
    """`phases` recipes that together mix every ingredient (dealt out over the phases, three more
    drawn for each); the first four phases' actions are FIRST_ACTIONS, the rest are drawn."""
    left = set(without)
    order = [i for i in INGREDIENTS if i not in left]
    rng.shuffle(order)
    out = []
    for number in range(phases):
        dealt = order[number::phases]
        extra = rng.sample(order, min(3, len(order)))
        if number < len(FIRST_ACTIONS):
            action = FIRST_ACTIONS[number]
        else:
            action = rng.choice(ACTIONS)
            action += "+evaluator" if action != "evaluator" and rng.random() < 0.3 else ""
        names = ["valid", "paged", *dealt, *extra] if number == 0 else [*dealt, *extra]
        out.append(Recipe(action, tuple(dict.fromkeys(n for n in names if n not in left or n == "valid"))))
    return out


class StreamGenerator:
    """See the module docstring. `base` is the tree's top: `runs/` (--storage-root) below it."""

    def __init__(self, base: Path, seed: int, without: Iterable[str] = ()) -> None:
        self.base, self.rng, self.seed = base, random.Random(seed), seed
        hostile_modes = HOSTILE_MODES not in set(without)
        self.modes = MODES if hostile_modes else tuple(m for m in MODES if m in ("ok", "raise", "hang"))
        self.storage = str(base / "runs")
        self.link = f"{self.storage}/escape"  # -> base/outside/escaped (made by the runner)
        self.runs: dict[str, RunModel] = {}
        self.ids = 0
        self.paged: RunModel | None = None
        self.phase_now: Phase = Phase(-1, "none", [])
        self.deferred: list[Callable[[], None]] = []  # the next phase's first records (see `later`)
        self.finished: set[str] = set()  # runs finished for good: their final VIEWs are on the state topic only
        self.reused: set[str] = set()  # run ids started again after their record expired: watermarks restart
        self.reopened: set[str] = set()  # runs reopened after they finished: their evictions must be deleted
        self.huge: list[
            str
        ] = []  # runs scored beyond a float's range (system_hostile.huge_scores): the tools read them

    # -- helpers -----------------------------------------------------------------------------

    def new_id(self, prefix: str, partition: int | None = None) -> str:
        while True:
            self.ids += 1
            run_id = f"{prefix}-{self.seed}-{self.ids}"
            if partition is None or partition_of(run_id) == partition:
                return run_id

    def emit(self, value: bytes | None, key: str | None, partition: int | None = None) -> None:
        chosen = partition if partition is not None else partition_of(key) if key else self.rng.randrange(PARTITIONS)
        self.phase_now.lines.append(Line(value, None if key is None else key.encode(), chosen))

    def event(self, kind: str, run_id: str, data: dict[str, Any], event_id: str | None = None) -> bytes:
        self.ids += 1
        body: dict[str, Any] = {
            "specversion": "1.0",
            "id": event_id or f"{kind}-{self.seed}-{self.ids}",
            "source": "system",
        }
        body.update({"type": f"ckptlog.{kind}.v1", "subject": run_id, "data": data})
        return json.dumps(body, separators=(",", ":"), allow_nan=True).encode()

    def start(self, run: RunModel, **config: Any) -> bytes:
        cfg = {"num_to_keep": run.keep, "checkpoint_score_attribute": "acc", "checkpoint_score_order": run.order}
        cfg.update(config)
        self.phase_now.root_files.append(run.root)
        return self.event("run_started", run.run_id, {"storage_path": run.root, "checkpoint_config": cfg})

    def add_run(self, prefix: str, partition: int, root: str | None, started: bool, keep: int | None) -> RunModel:
        run_id = self.new_id(prefix, partition)
        run = RunModel(run_id, partition, root or f"{self.storage}/{run_id}", started, keep)
        self.runs[run_id] = run
        return run

    def report(
        self,
        run: RunModel,
        path: str | None = None,
        validation: Any = False,
        write: bool = True,
        metrics: dict[str, Any] | None = None,
    ) -> str:
        """A report of `run` (a new checkpoint below its root unless `path`; `metrics` besides its
        step instead of a random `acc`); returns the path."""
        run.step += 1
        if path is None:
            path = f"{run.root}/ckpt-{run.step:04d}"
        if write:
            self.phase_now.writes.append((run.run_id, path))
        run.paths.append(path)
        if metrics is None:
            score = round(self.rng.random(), 3) if self.rng.random() < 0.9 else None
            metrics = {"acc": score} if score is not None else {}
        data = {"metrics": {"step": run.step, **metrics}, "checkpoint": {"path": path}, "validation": validation}
        self.phase_now.validations += validation is not False
        self.emit(self.event("report", run.run_id, data), run.run_id)
        return path

    def reports(self, run: RunModel, count: int, validate: float = 0.0) -> None:
        for _ in range(count):
            if self.rng.random() < 0.1:
                run.step += 1
                self.emit(
                    self.event("report", run.run_id, {"metrics": {"step": run.step}, "checkpoint": None}), run.run_id
                )
            elif self.rng.random() < validate:
                mode = self.rng.choice(self.modes)
                self.report(run, validation={"fn_kwargs": {"mode": mode}, "timeout_s": 1.0})
            else:
                self.report(run)

    def later(self, step: Callable[[], None]) -> None:
        """Emit `step`'s records at the start of the next phase: an attack across partitions comes
        after the victim's root is claimed, as contract §9 protects it only from then on (the claim
        is written when the batch registering the root is folded)."""
        self.deferred.append(step)

    def started_runs(self, partition: int | None = None) -> list[RunModel]:
        return [r for r in self.runs.values() if r.started and (partition is None or r.partition == partition)]

    # -- phases ------------------------------------------------------------------------------

    def phase(self, number: int, recipe: Recipe, deleted: dict[str, list[str]]) -> Phase:
        """The records (and files) of phase `number`; `deleted` is, per run, the paths whose
        deletion the outputs confirmed so far (for `reuse`)."""
        self.phase_now = Phase(number, recipe.action, list(recipe.ingredients))
        deferred, self.deferred = self.deferred, []
        for step in deferred:
            step()
        if self.paged is not None:  # the rest of a paged run, after each later phase's action
            self.reports(self.paged, 140 if self.paged.step < 300 else PAGED_MORE)
            if self.paged.step >= PAGED_LAST:
                self.paged = None
        for name in recipe.ingredients:
            if name == "reuse":
                hostile.reuse(self, deleted)
            else:
                BUILDERS[name](self)
        return self.phase_now


def valid(gen: StreamGenerator) -> None:
    for partition in range(PARTITIONS):
        for keep in gen.rng.sample([1, 2, 3, None], 2):
            run = gen.add_run("run", partition, None, True, keep)
            run.order = gen.rng.choice(["max", "min"])
            extra = {"keep_every_n_steps": 3, "step_attribute": "step"} if gen.rng.random() < 0.3 else {}
            gen.emit(gen.start(run, **extra), run.run_id)
            gen.reports(run, gen.rng.randint(3, 7))


def more(gen: StreamGenerator) -> None:
    for run in gen.rng.sample(gen.started_runs(), min(3, len(gen.started_runs()))):
        if run.keep is None or run.keep <= 3:
            gen.reports(run, gen.rng.randint(2, 5))
        if gen.rng.random() < 0.2:
            gen.emit(gen.event("worker_group_restart", run.run_id, {"num_workers": 2}), run.run_id)


def validations(gen: StreamGenerator) -> None:
    for partition in range(PARTITIONS):
        run = gen.add_run("val", partition, None, True, 2)
        gen.emit(gen.start(run), run.run_id)
        for mode in [*gen.rng.sample(gen.modes, 4), "ok"]:
            gen.report(run, validation={"fn_kwargs": {"mode": mode}, "timeout_s": 1.0})
        gen.reports(run, 2)


def paged(gen: StreamGenerator) -> None:
    """num_to_keep 300, keeping the latest (no score): 260 reports now, 140 in the next phase (after
    its action), whose evictions empty whole pages; PAGED_MORE in each later phase (after a
    restart, the partition moving to a joining instance and back) up to PAGED_LAST."""
    if gen.paged is not None or any(r.keep == 300 for r in gen.runs.values()):
        return
    run = gen.add_run("paged", gen.rng.randrange(PARTITIONS), None, True, 300)
    gen.emit(gen.start(run, checkpoint_score_attribute=None), run.run_id)
    gen.reports(run, 260)
    gen.paged = run


BUILDERS: dict[str, Callable[[StreamGenerator], None]] = {
    "valid": valid,
    "continue": more,
    "validations": validations,
    "paged": paged,
    **hostile.BUILDERS,
}


def describe(lines: Sequence[Line]) -> str:
    """A short account of some records, for a problem's reproduction."""
    shown = [f"p{line.partition} key={line.key!r} {(line.value or b'<tombstone>')[:160]!r}" for line in lines[:20]]
    return "\n".join(shown)
