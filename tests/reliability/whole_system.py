"""The whole-system, model-based, differential test (issue 20): hostile streams through real
`ckptlog run` and `ckptlog evaluate` processes, on a real broker and a real tree, checked after
every phase against `ckptlog fold` of the same input.

A stream (`run_stream`) is `phases` phases; each: its action (restart, rebalance, other limits,
the other evaluator), its files and records (system_stream.py), a wait until everything settled,
then every check of system_checks.py. The quick version is tests/reliability/test_whole_system.py;
the long one

    .venv/bin/python -m tests.reliability.whole_system --streams 20 [--phases 5] [--seed 1]

(a broker from $KAFKA_BOOTSTRAP_SERVERS, else a LocalBroker of its own). Seeds are printed: a
failing stream is re-run alone with `--seed S --streams 1`, and shrunk by hand by leaving
ingredients out (`CKPTLOG_TEST_SYSTEM_WITHOUT=deep,garbage`: a temporary switch, never set in CI).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ckptlog import Reader
from ckptlog.kafka import Record, read_topic
from tests.reliability import system_checks as checks
from tests.reliability.crash_checks import check_outputs, check_watermarks, replay
from tests.reliability.crash_processes import broker
from tests.reliability.system_runner import System
from tests.reliability.system_stream import (
    DEFAULT_KEEP,
    FINISHED_KEPT,
    MAX_DEPTH,
    MAX_PAYLOAD_BYTES,
    PARTITIONS,
    StreamGenerator,
    recipes,
)

WITHOUT_ENV = "CKPTLOG_TEST_SYSTEM_WITHOUT"


@dataclass
class StreamReport:
    seed: int
    phases: int = 0
    records: int = 0
    dead_letters: int = 0
    validations: int = 0
    deleted: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"stream seed={self.seed}: {self.phases} phases, {self.records} input records, {self.dead_letters} dead "
            f"letters, {self.validations} validations, {self.deleted} deletions confirmed, "
            f"{len(self.problems)} problems, {self.seconds:.0f}s"
        )


class Stream:
    def __init__(self, bootstrap: str, workdir: Path, seed: int, phases: int) -> None:
        self.system = System(bootstrap, workdir, seed)
        without = checks.env_list(WITHOUT_ENV)
        self.gen = StreamGenerator(self.system.tree.base, seed, without)
        self.recipes = recipes(random.Random(seed), phases, without)
        self.report = StreamReport(seed, problems=self.system.problems)
        self.deleted: dict[str, list[str]] = {}
        self.checkpoint_ends: dict[int, int] = {}

    def problems(self, found: list[str]) -> None:
        for text in found:
            self.system.problem(text)

    async def run(self) -> StreamReport:
        started = time.monotonic()
        try:
            await self.system.start()
            for number, recipe in enumerate(self.recipes):
                print(
                    f"[system seed={self.report.seed}] phase {number}: {recipe.action} {list(recipe.ingredients)}",
                    flush=True,
                )
                await self.phase(number, recipe.action)
            self.system.phase = "end"
            await self.system.stop()
            self.problems(
                checks.tracebacks(
                    [
                        p.log
                        for p in self.system.started
                        if "-evaluate" not in p.log.name and "-other-limits" not in p.log.name
                    ]
                )
            )
        finally:
            for instance in self.system.started:
                instance.kill()
            self.report.seconds = time.monotonic() - started
        return self.report

    async def phase(self, number: int, action: str) -> None:
        self.system.phase = str(number)
        await self.system.revive()
        if number and "rebalance" in self.recipes[number - 1].action.split("+"):
            await self.system.act("leave")
        for name in action.split("+"):
            await self.system.act(name)
        phase = self.gen.phase(number, self.recipes[number], self.deleted)
        self.system.tree.write(phase.writes, phase.root_files)
        before = self.system.tree.snapshot()
        await self.system.produce(phase)
        records = await self.system.settle()
        self.report.phases += 1
        self.report.validations += phase.validations
        await self.check(records, before)

    async def check(self, records: list[Record], before: dict[str, str]) -> None:
        s, conn = self.system.settings, self.system.conn
        model, found = await self.fold(records)
        dlq = await read_topic(conn, s.dlq_topic)
        outputs = {t: await read_topic(conn, t) for t in (s.checkpoints_topic, s.validations_topic, s.watermarks_topic)}
        state = await read_topic(conn, s.state_topic)
        found += checks.alive([(f"processor {i}", p) for i, p in enumerate(self.system.processors)])
        found += checks.alive([("evaluator", self.system.evaluator)] if self.system.evaluator else [])
        found += checks.check_dead_letters(dlq, model, s.input_topic)
        found += [
            f"validation request without a result: {m}"
            for m in checks.unanswered(outputs[s.validations_topic], records)
        ][:5]
        found += checks.check_views("Reader", await asyncio.to_thread(self.reader_views), model, self.gen.finished)
        deleted_now, self.deleted = checks.deleted_by_outputs(outputs[s.checkpoints_topic], self.checkpoint_ends)
        self.checkpoint_ends = {r.partition: r.offset + 1 for r in outputs[s.checkpoints_topic]}
        found += checks.check_tree(self.system.tree, before, model, deleted_now)
        found += checks.check_reopened(outputs[s.checkpoints_topic], self.gen.reopened)
        found += checks.check_schemas(outputs, state, dlq)
        found += await self.outputs(records, model)
        found += await self.tools(model, len(dlq))
        self.report.records, self.report.dead_letters = len(records), len(dlq)
        self.report.deleted = sum(len(p) for p in self.deleted.values())
        self.problems(found)

    async def outputs(self, records: list[Record], model: checks.Model) -> list[str]:
        """The crash matrix's checks (crash_checks.py): every output id and dead letter the log makes,
        folded record by record as the service does, published exactly once; no watermark back."""
        s, conn = self.system.settings, self.system.conn
        replayed = replay(records, s, set(self.system.tree.written))
        found = await check_outputs(conn, s, replayed, exactly_once=True)
        gone = self.gen.finished | {run for _, run in model.linked}  # retired, or refused for a link: in no view
        marks, _ = await check_watermarks(conn, s, model.views, self.gen.reused, gone)
        return [f"{problem} (crash_checks)" for problem in found + marks]

    def reader_views(self) -> dict[str, object]:
        with Reader(bootstrap_servers=self.system.bootstrap, topics=self.system.topics) as reader:
            return {run_id: view.model_dump(mode="json") for run_id, view in reader.runs().items()}

    async def fold(self, records: list[Record]) -> tuple[checks.Model, list[str]]:
        """Export each partition, fold it with one worker and two; the model and what differed.
        (The CLI processes of a step run at once: their start-up is most of their cost.)"""
        model, found, paths = checks.Model(), [], [self.system.workdir / f"export-{p}.jsonl" for p in range(PARTITIONS)]
        exports = await asyncio.gather(
            *(
                self.system.cli(*self.base_args("export", str(paths[p])), "--partition", str(p))
                for p in range(PARTITIONS)
            )
        )
        expected = [checks.exported_lines(records, p) for p in range(PARTITIONS)]
        for partition, (export, path, (lines, _, _)) in enumerate(zip(exports, paths, expected, strict=True)):
            found += [p for p in [export.failed()] if p]
            found += checks.check_export(path.read_bytes() if path.exists() else b"", lines, partition)
            path.write_bytes(b"".join(line + b"\n" for line in lines))  # fold what the topic holds
        folds = await asyncio.gather(*(self.system.cli(*self.fold_args(path, w)) for path in paths for w in (1, 2)))
        for partition, (_, offsets, left_out) in enumerate(expected):
            one, two = folds[2 * partition], folds[2 * partition + 1]
            found += [p for p in (one.failed(), two.failed()) if p]
            if one.out != two.out:
                found.append(
                    f"`ckptlog fold --workers 2` differs from --workers 1 on partition {partition}: "
                    f"{checks.fold_difference(one.out, two.out)}"
                )
            checks.model_of(partition, json.loads(one.out), offsets, left_out, model, expected[partition][0])
        return model, found

    def base_args(self, command: str, *rest: str) -> list[str]:
        s = self.system.settings
        return [command, *rest, "--bootstrap-servers", self.system.bootstrap, "--topic", s.input_topic]

    def fold_args(self, path: Path, workers: int) -> list[str]:
        return [
            "fold",
            str(path),
            "--storage-root",
            str(self.system.tree.storage),
            "--default-num-to-keep",
            str(DEFAULT_KEEP),
            "--max-depth",
            str(MAX_DEPTH),
            "--max-payload-bytes",
            str(MAX_PAYLOAD_BYTES),
            "--finished-runs-kept",
            str(FINISHED_KEPT),
            "--workers",
            str(workers),
            "--no-progress",
        ]

    async def tools(self, model: checks.Model, dlq_count: int) -> list[str]:
        """inspect --json, watch RUN --once (a few runs), rejections --json: exit 0, parseable, right."""
        s, b = self.system.settings, ["--bootstrap-servers", self.system.bootstrap]
        topics = ["--state-topic", s.state_topic, "--dlq-topic", s.dlq_topic]
        runs = sorted(model.views, key=lambda r: -len(model.views[r]["checkpoints"]))
        watched = runs[:1] + random.Random(len(runs)).sample(runs[1:], min(1, len(runs) - 1))
        watched += [r for r in self.gen.huge if r in model.views and r not in watched]  # scores past a float
        inspect, rejections, *watches = await asyncio.gather(
            self.system.cli("inspect", "--json", *b, *topics),
            self.system.cli("rejections", "--json", *b, "--dlq-topic", s.dlq_topic),
            *(self.system.cli("watch", run_id, "--once", *b, *topics) for run_id in watched),
        )
        found = [p for p in [inspect.failed()] if p] or checks.check_inspect(
            inspect.out, model, dlq_count, self.gen.finished
        )
        found += [p for p in [rejections.failed()] if p] or checks.check_rejections(rejections.out, dlq_count)
        for run_id, watch in zip(watched, watches, strict=True):
            found += [p for p in [watch.failed()] if p]
            if watch.code == 0 and not watch.out.strip():
                found.append(f"`ckptlog watch {run_id} --once` printed nothing")
        return found + await self.history_tools(model, watched[0]) + await self.huge_tools(model)

    def replay_args(self) -> tuple[list[str], list[str]]:
        """What `history`, `explain` and `inspect --as-of` replay (the log and the processor's
        snapshots), and what the fold needs besides (explain: the stream's limits)."""
        s = self.system.settings
        replay = [
            "--bootstrap-servers",
            self.system.bootstrap,
            "--input-topic",
            s.input_topic,
            "--snapshots",
            s.snapshots,
        ]
        fold = [f"--storage-root={s.storage_root}", f"--default-num-to-keep={DEFAULT_KEEP}"]
        fold += [f"--max-depth={MAX_DEPTH}", f"--max-payload-bytes={MAX_PAYLOAD_BYTES}"]
        return replay, [*fold, f"--finished-runs-kept={FINISHED_KEPT}"]

    async def history_tools(self, model: checks.Model, run_id: str) -> list[str]:
        """explain of the run's kept checkpoints and inspect --as-of its end (contract §10): they replay
        the log with the processor's snapshots, and must agree with the model's fold."""
        replay, fold = self.replay_args()
        kept = [c["path"] for c in model.views[run_id]["checkpoints"]][:2]
        as_of, *explains = await asyncio.gather(
            self.system.cli("inspect", run_id, "--as-of", "2100-01-01T00:00:00Z", "--json", *replay),
            *(self.system.cli("explain", run_id, path, "--json", *replay, *fold) for path in kept),
        )
        found = [p for p in [as_of.failed()] if p]
        if not found:
            got = json.loads(as_of.out)["runs"].get(run_id)
            if not checks.same(got, model.views[run_id]):
                found.append(f"`ckptlog inspect {run_id} --as-of` differs from the fold of the log: {got}")
        for path, explained in zip(kept, explains, strict=True):
            failed = explained.failed()
            state = None if failed else json.loads(explained.out)["state"]
            if failed or state not in ("kept", "latest", "pending", "preserved"):
                found.append(f"`ckptlog explain {run_id} {path}`: {failed or state} for a kept checkpoint")
        return found

    async def huge_tools(self, model: checks.Model) -> list[str]:
        """`ckptlog history` and `explain` as text (they format scores) of the runs scored past a
        float's range (system_hostile.huge_scores) and one of their evicted checkpoints: exit 0, and
        the history shows the scores (keep 1 over ±10**400: some eviction is ranked by one)."""
        (replay, fold), found = self.replay_args(), []
        runs = [r for r in self.gen.huge if model.evicted.get(r)]
        answers = await asyncio.gather(
            *(self.system.cli("history", run_id, *replay) for run_id in runs),
            *(self.system.cli("explain", run_id, model.evicted[run_id][0], *replay, *fold) for run_id in runs),
        )
        for i, answer in enumerate(answers):
            failed, shown = answer.failed(), b"e+400" in answer.out or i >= len(runs)  # history: every eviction's score
            if failed or not shown or not answer.out.strip():
                found.append(failed or f"`ckptlog {' '.join(answer.argv[:2])}` shows no ±1e+400: {answer.out[-400:]!r}")
        return found


async def run_stream(bootstrap: str, workdir: Path, seed: int, phases: int) -> StreamReport:
    return await Stream(bootstrap, workdir, seed, phases).run()


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.reliability.whole_system", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--phases", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1, help="the first stream's seed (the next ones count up)")
    parser.add_argument("--workdir", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="whole-system-"))
    print(
        f"whole-system: {args.streams} streams of {args.phases} phases from seed {args.seed}; under {workdir}",
        flush=True,
    )
    reports = []
    with broker(workdir) as bootstrap:
        for seed in range(args.seed, args.seed + args.streams):
            reports.append(asyncio.run(run_stream(bootstrap, workdir / f"stream-{seed}", seed, args.phases)))
            print(reports[-1].summary(), flush=True)
    for report in reports:
        for problem in report.problems:
            print("PROBLEM", problem, flush=True)
    print(
        f"{len(reports)} streams, {sum(r.phases for r in reports)} phases, "
        f"{sum(len(r.problems) for r in reports)} problems, {sum(r.seconds for r in reports):.0f}s",
        flush=True,
    )
    return 1 if any(r.problems for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
