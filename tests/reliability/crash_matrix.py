"""The crash matrix (issue 13): kill `ckptlog run` with SIGKILL at every named crash point while a
stream flows, restart it, and check that nothing was lost, duplicated or wrongly deleted.

A scenario is a chain: instance i runs with `CKPTLOG_CRASH_AT=<point i>@n` until it dies there
(a `close.*` point is reached by SIGTERM once it caught up, a `replay.*` point by `ckptlog
replay`, after which the processor restarts on the replayed snapshots); instance i+1 restarts
without that point. Every `check_every` kills, and at the end, the feeder pauses, a clean
instance catches up, and the checks of crash_checks.py run against a clean fold of the log;
then it is stopped with SIGTERM (it must exit 0). The quick scenarios are in
test_crash_matrix.py; the long version is

    .venv/bin/python -m tests.reliability.crash_matrix --events 100000 [--s3] [--guarantee at_least_once]

(a broker from $KAFKA_BOOTSTRAP_SERVERS, else a LocalBroker of its own; --s3 starts moto).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckptlog.kafka import ensure_topics, read_topic
from ckptlog.kafka.topics import committed_offsets
from ckptlog.processor.failpoints import POINTS
from ckptlog.processor.service.processor import topic_specs
from ckptlog.processor.service.settings import ServiceSettings, load_settings
from ckptlog.processor.service.views import read_views
from tests.reliability import snapshot_faults
from tests.reliability.crash_checks import check_outputs, check_tree, check_watermarks, clean_fold, replay, same
from tests.reliability.crash_processes import KILLED, Feeder, Instance, broker, moto
from tests.reliability.crash_workload import LocalTree, RemoteTree, Tree, Workload
from tests.storage_contract import S3Endpoint

PARTITIONS = 2
STEP_TIMEOUT_S = 45.0
SETTLE_TIMEOUT_S = 90.0


RANDOM = "random"
"""`random@MS`: not a crash point; the test itself SIGKILLs a clean instance MS milliseconds after it
caught up, wherever it is (e.g. inside a transaction, which no named point can reach)."""


def trigger(point: str) -> str:
    """How an instance is brought to the point: by the stream, by SIGTERM, by `ckptlog replay`, or by
    the test's own SIGKILL."""
    if point in snapshot_faults.FAULTS:
        return "storage"  # not a kill: the test damages the snapshots between two instances
    return {"close": "sigterm", "replay": "replay", RANDOM: "timer"}.get(point.split(".")[0], "stream")


def applicable(point: str, guarantee: str, s3: bool) -> bool:
    if point == "commit.published_not_committed":
        return guarantee == "at_least_once"
    if point in ("object.half_written", "object.before_rename"):
        return not s3  # the local write path (temp file + rename)
    return point != "object.before_put" or s3


@dataclass(frozen=True)
class Scenario:
    name: str
    kills: tuple[str, ...]  # "point@n", in order
    guarantee: str = "exactly_once"
    s3: bool = False
    min_events: int = 300
    rate: float = 150.0  # events per second
    check_every: int = 0  # 0: only at the end
    repeat_until_events: bool = False  # cycle through the kills until min_events are produced
    seed: int = 1
    runs: int = 6
    snapshot_every: int = 40
    reuse: float = 0.05  # share of reports that reuse the path of a checkpoint just deleted
    from_snapshot: bool = False  # every replay from the current snapshots (default: every second one)


@dataclass
class Report:
    scenario: str
    landed: list[str] = field(default_factory=list)  # the kills that hit their point
    instances: int = 0
    checks: int = 0
    events: int = 0
    log_records: int = 0
    outputs_checked: int = 0
    watermarks: int = 0
    dead_letters: int = 0
    evictions: int = 0
    reused: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"{self.scenario}: {len(self.landed)} kills at {len({p.split('@')[0] for p in self.landed})} points, "
            f"{self.instances} instances, {self.checks} settled checks, {self.events} events produced, "
            f"{self.log_records} input records, {self.outputs_checked} output ids, {self.watermarks} watermarks, "
            f"{self.dead_letters} dead letters, {self.evictions} evictions, {self.reused} paths reused, "
            f"{len(self.problems)} problems, {self.seconds:.0f}s"
        )


def long_kills(guarantee: str, s3: bool, seed: int) -> Iterator[str]:
    """Every applicable point, shuffled, with a random count; over and over."""
    rng = random.Random(seed)
    points = [p for p in POINTS if applicable(p, guarantee, s3)]
    most = {"restore": 2, "close": 2, "replay": 1, "snapshot": 3, "object": 3, "completions": 8}
    while True:
        rng.shuffle(points)
        for i, point in enumerate(points):
            yield f"{point}@{rng.randint(1, most.get(point.split('.')[0], 25))}"
            if i % 3 == 2:
                yield f"{RANDOM}@{rng.randint(20, 3000)}"


class Chain:
    """One scenario against one broker; `await Chain(...).run()` returns its Report."""

    def __init__(self, scenario: Scenario, bootstrap: str, workdir: Path, s3: S3Endpoint | None = None) -> None:
        self.scenario, self.workdir, self.report = scenario, workdir, Report(scenario.name)
        (workdir / "logs").mkdir(parents=True, exist_ok=True)
        self.tree, values = self._storage(scenario, workdir, s3)
        tag = uuid.uuid4().hex[:8]
        for name in ("input", "checkpoints", "validations", "watermarks", "state", "dlq"):
            values[f"{name}_topic"] = f"cm-{tag}-{name}"
        values.update(
            bootstrap_servers=bootstrap,
            group_id=f"cm-{tag}",
            group_instance_id="crash-matrix",
            guarantee=scenario.guarantee,
            topic_partitions=PARTITIONS,
            snapshot_every=scenario.snapshot_every,
            keep_snapshots=2,
            poll_timeout_ms=50,
            session_timeout_ms=6000,
        )
        self.settings: ServiceSettings = load_settings(None, **values)
        self.config = workdir / "config.json"
        self.config.write_text(json.dumps(values))
        self.snapshots = self.settings.snapshots
        self.conn = self.settings.connection(bootstrap)
        self.workload = Workload(self.tree, scenario.seed, scenario.runs, scenario.reuse)
        self.feeder = Feeder(self.conn, self.settings.input_topic, self.workload, scenario.rate)
        self.guarded: dict[str, str] = {}
        self.instances: list[Instance] = []  # every subprocess started (killed on the way out)
        self._logs = itertools.count()
        self._replays = itertools.count(1)

    @staticmethod
    def _storage(scenario: Scenario, workdir: Path, s3: S3Endpoint | None) -> tuple[Tree, dict[str, Any]]:
        if not scenario.s3:
            tree: Tree = LocalTree(workdir / "tree")
            return tree, {"storage_root": f"{tree.base}/runs", "snapshots": str(workdir / "snapshots")}
        assert s3 is not None, "an s3 scenario needs the moto endpoint"
        bucket, options = s3["make_bucket"](), s3["storage_options"]
        tree = RemoteTree(f"{bucket}/tree", options)
        return tree, {
            "storage_root": f"{tree.base}/runs",
            "snapshots": f"{bucket}/snapshots",
            "snapshot_storage_options": options,
            "checkpoint_storage_options": {"s3": options},
        }

    def _problem(self, text: str) -> None:
        self.report.problems.append(text)
        print(f"[{self.scenario.name}] PROBLEM {text}", flush=True)

    def _instance(self, command: str, label: str, crash: str | None, *extra: str) -> Instance:
        log = self.workdir / "logs" / f"{next(self._logs):03d}-{label}.log"
        argv = [command, "--config", str(self.config), *(extra or ("--snapshots", self.snapshots))]
        self.instances.append(Instance(argv, log, crash))
        return self.instances[-1]

    def processor(self, crash: str | None = None, label: str | None = None) -> Instance:
        self.report.instances += 1
        return self._instance("run", label or crash or "clean", crash)

    async def prepare(self) -> None:
        """Create the topics, note what lies outside the runs root, start the stream."""
        await ensure_topics(self.conn, topic_specs(self.settings), PARTITIONS)
        self.guarded = self.tree.guarded()
        self.feeder.start()

    async def run(self) -> Report:
        started = time.monotonic()
        await self.prepare()
        try:
            await self._chain(self._kills())
            await self._check(final=True)
        finally:
            await self.feeder.stop()
            for instance in self.instances:
                instance.kill()
            self.report.events = self.feeder.produced
            self.report.seconds = time.monotonic() - started
        return self.report

    def _kills(self) -> Iterable[str]:
        s = self.scenario
        if not s.repeat_until_events:
            return s.kills
        cycled = itertools.cycle(s.kills) if s.kills else long_kills(s.guarantee, s.s3, s.seed)
        return itertools.takewhile(lambda _: self.feeder.produced < s.min_events, cycled)

    async def _chain(self, kills: Iterable[str]) -> None:
        replays: list[str] = []
        since_check = 0
        for spec in kills:
            self.feeder.failed()
            if trigger(spec.split("@")[0]) == "replay":
                replays.append(spec)
                continue
            if trigger(spec.split("@")[0]) == "storage":
                self._damage(spec)
                continue
            if replays:
                await self._replay(replays)
                replays = []
            await self._kill(spec)
            since_check += 1
            if self.scenario.check_every and since_check >= self.scenario.check_every:
                await self._check()
                since_check = 0
        if replays:
            await self._replay(replays)

    async def _kill(self, spec: str) -> None:
        point, _, count = spec.partition("@")
        how = trigger(point)
        instance = self.processor(None, spec) if how == "timer" else self.processor(spec)
        if how in ("sigterm", "timer"):
            if not await instance.caught_up(PARTITIONS, STEP_TIMEOUT_S):
                self._problem(f"{spec}: the instance did not catch up; see {instance.log}")
            await asyncio.sleep(int(count) / 1000 if how == "timer" else 0)
            instance.proc.send_signal(signal.SIGKILL if how == "timer" else signal.SIGTERM)
        await self._expect_killed(instance, spec)
        print(f"[{self.scenario.name}] {spec}: {self.feeder.produced} events so far", flush=True)

    def _damage(self, spec: str) -> None:
        s = self.settings
        hit = snapshot_faults.damage(
            self.snapshots, s.input_topic, PARTITIONS, spec.split("@")[0], s.snapshot_storage_options
        )
        print(f"[{self.scenario.name}] {spec}: {hit or 'no delta to damage'}", flush=True)
        self.report.landed.append(spec)

    async def _expect_killed(self, instance: Instance, spec: str) -> None:
        code = await instance.exit_code(STEP_TIMEOUT_S)
        if code is None:
            instance.kill()
            self._problem(f"{spec}: not reached within {STEP_TIMEOUT_S:.0f}s; see {instance.log}")
        elif code != KILLED:
            self._problem(f"{spec}: the instance exited {code} instead of dying there; see {instance.log}")
        else:
            self.report.landed.append(spec)
        self._scan(instance)

    def _scan(self, instance: Instance) -> None:
        text = instance.text()
        for needle in ("event=fatal", "Traceback", "event=fold_failed", "checkpoints_missing"):
            if needle in text:
                self._problem(f"{instance.log.name}: logged {needle!r}")

    async def _replay(self, specs: list[str]) -> None:
        """`ckptlog replay` into a new snapshot location, killed at each spec, then once cleanly; the
        processor restarts on the new snapshots. Replays start from the log start or (every second
        one, or all with `from_snapshot`) from the current snapshots (--from-snapshot) — except a replay
        to be killed at `replay.batch`: from a snapshot at the committed offset it folds nothing."""
        await self._committed_everywhere()
        number = next(self._replays)
        flags = ["--snapshots", f"{self.settings.snapshots}-replay{number}"]
        folds = any(spec.startswith("replay.batch") for spec in specs)  # a current snapshot leaves no batch
        if (self.scenario.from_snapshot or number % 2 == 0) and not folds:
            flags += ["--from-snapshot", self.snapshots]
        for spec in specs:
            await self._expect_killed(self._instance("replay", spec, spec, *flags), spec)
        clean = self._instance("replay", "replay-clean", None, *flags)
        if (code := await clean.exit_code(STEP_TIMEOUT_S)) != 0:
            self._problem(f"ckptlog replay exited {code}; see {clean.log}")
            return
        self.snapshots = flags[1]

    async def _committed_everywhere(self) -> None:
        """A replay writes a snapshot only where the group has a committed offset: if a partition has
        none yet (every instance so far died first), a clean instance runs until it has."""
        topic, group = self.settings.input_topic, self.settings.group_id
        if len(await committed_offsets(self.conn, group, topic, PARTITIONS)) == PARTITIONS:
            return
        instance = self.processor(None, "until-committed")
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while len(await committed_offsets(self.conn, group, topic, PARTITIONS)) < PARTITIONS:
            if time.monotonic() > deadline:
                self._problem(f"the group committed no offset on some partition; see {instance.log}")
                break
            await asyncio.sleep(0.2)
        # the offsets may appear at once (a dead instance's commit the coordinator completed late):
        # stop it only once it runs, or the SIGTERM lands before its handler exists (exit -15)
        await instance.caught_up(PARTITIONS, STEP_TIMEOUT_S)
        if (code := await instance.stop()) != 0:
            self._problem(f"graceful stop exited {code}; see {instance.log}")

    async def _check(self, final: bool = False) -> None:
        """Pause the stream, let a clean instance settle, check everything, stop it gracefully."""
        instance = self.processor(None)
        if final:
            await self.feeder.until(self.scenario.min_events)
        await self.feeder.pause()
        try:
            if not await instance.caught_up(PARTITIONS, STEP_TIMEOUT_S):
                self._problem(f"the clean instance did not catch up; see {instance.log}")
            await self.verify()
        finally:
            if (code := await instance.stop()) != 0:
                self._problem(f"graceful stop exited {code}; see {instance.log}")
            self._scan(instance)
            self.feeder.resume()
        self.report.checks += 1

    async def verify(self) -> None:
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while True:
            records = await read_topic(self.conn, self.settings.input_topic)
            expected, owed = clean_fold(records, self.settings)
            views = await read_views(self.conn, self.settings.state_topic)
            if (same(views, expected) and owed == 0) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        if not same(views, expected):
            differ = sorted(r for r in expected.keys() | views.keys() if not same(views.get(r), expected.get(r)))
            self._problem(f"published views differ from a clean fold of the log for runs {differ}")
        if owed:
            self._problem(f"{owed} deletions still owed after {SETTLE_TIMEOUT_S:.0f}s")
        self.report.log_records = len(records)
        replayed = replay(records, self.settings, self.workload.written)
        self.report.outputs_checked, self.report.dead_letters = len(replayed.ids), len(replayed.dead)
        self.report.evictions, self.report.reused = replayed.evictions, replayed.reused
        once = self.settings.guarantee == "exactly_once"
        for problem in await check_outputs(self.conn, self.settings, replayed, once):
            self._problem(problem)
        marks, self.report.watermarks = await check_watermarks(self.conn, self.settings, expected)
        for problem in [*marks, *check_tree(self.tree, expected, replayed, self.guarded)]:
            self._problem(problem)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.reliability.crash_matrix", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--events", type=int, default=100_000, help="events to produce (kills go on until then)")
    parser.add_argument("--s3", action="store_true", help="snapshots and checkpoints on s3:// (moto)")
    parser.add_argument("--guarantee", default="exactly_once", choices=["exactly_once", "at_least_once"])
    parser.add_argument("--rate", type=float, default=600.0, help="events per second")
    parser.add_argument("--check-every", type=int, default=10, help="a settled check after every N kills")
    parser.add_argument("--kills", default="", help="comma-separated point@n to cycle through (default: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a new temporary directory")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the instances on the way out
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="crash-matrix-"))
    kills = tuple(k for k in args.kills.split(",") if k)
    name = f"long-{args.guarantee}-{'s3' if args.s3 else 'file'}"
    scenario = Scenario(
        name, kills, args.guarantee, args.s3, args.events, args.rate, args.check_every, True, args.seed, runs=12
    )
    print(f"crash matrix {name}: {args.events} events at {args.rate}/s; logs under {workdir}", flush=True)
    with broker(workdir) as bootstrap, moto(args.s3) as s3:
        report = asyncio.run(Chain(scenario, bootstrap, workdir / "chain", s3).run())
    print(report.summary(), flush=True)
    print("kills:", " ".join(report.landed), flush=True)
    for problem in report.problems:
        print("PROBLEM", problem, flush=True)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
