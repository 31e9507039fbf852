"""The whole-system test's processes: `ckptlog run` instances (crash_processes.Instance), `ckptlog
evaluate` processes, the CLI tools, and the phase's producer and actions.

One `System` is one stream: its own topics, consumer groups, snapshot location and tree. Actions
between phases: a SIGTERM or SIGKILL restart of the processor, a rebalance (a second instance joins
for the phase and leaves after its check), a restart with other --max-depth (which the restore
must refuse, exit 1), or the other evaluator (sync function on threads / async function on the
loop). Problems are collected, never raised: a phase goes on to its checks whatever happened.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ckptlog.client.connect import Topics
from ckptlog.kafka import IdempotentProducer, KafkaIOError, OutRecord, ensure_topics, read_topic
from ckptlog.kafka.reader import Record
from ckptlog.kafka.topics import committed_offsets
from ckptlog.processor.service.harness import run_argv
from ckptlog.processor.service.processor import topic_specs
from ckptlog.processor.service.settings import ServiceSettings, load_settings
from tests.reliability import snapshot_faults
from tests.reliability.crash_processes import KILLED, Instance
from tests.reliability.system_stream import (
    DEFAULT_KEEP,
    FINISHED_KEPT,
    MAX_DEPTH,
    MAX_PAYLOAD_BYTES,
    OTHER_MAX_DEPTH,
    PARTITIONS,
    Phase,
)
from tests.reliability.system_tree import SystemTree

STEP_TIMEOUT_S = 60.0
SETTLE_TIMEOUT_S = 90.0
ANSWER_WAIT_S = 10.0  # how long a settled log waits for the last validation results
EVALUATOR_FNS = ("tests.reliability.system_validate:validate_async", "tests.reliability.system_validate:validate_sync")


@dataclass
class Cli:
    """What a CLI tool printed."""

    argv: list[str]
    code: int | None
    out: bytes
    err: bytes

    def failed(self) -> str | None:
        if self.code == 0:
            return None
        return f"`ckptlog {' '.join(self.argv[:2])}` exited {self.code}: {self.err.decode(errors='replace')[-600:]}"


@dataclass
class System:
    bootstrap: str
    workdir: Path
    seed: int
    problems: list[str] = field(default_factory=list)
    processors: list[Instance] = field(default_factory=list)  # the ones that should be running
    evaluator: Instance | None = None
    started: list[Instance] = field(default_factory=list)  # every subprocess (killed at the end)
    evaluator_kind: int = 0
    phase: str = "start"

    def __post_init__(self) -> None:
        tag = f"ws{self.seed}-{uuid.uuid4().hex[:6]}"
        self.tree = SystemTree(self.workdir / "tree")
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        values: dict[str, object] = {f"{n}_topic": f"{tag}-{n}" for n in ("input", "checkpoints", "validations")}
        values.update({f"{n}_topic": f"{tag}-{n}" for n in ("watermarks", "state", "dlq")})
        values.update(
            bootstrap_servers=self.bootstrap,
            group_id=tag,
            storage_root=str(self.tree.storage),
            snapshots=str(self.workdir / "snapshots"),
            default_num_to_keep=DEFAULT_KEEP,
            max_depth=MAX_DEPTH,
            max_payload_bytes=MAX_PAYLOAD_BYTES,
            finished_runs_kept=FINISHED_KEPT,
        )
        self.settings: ServiceSettings = load_settings(None, **values)
        self.conn = self.settings.connection(self.bootstrap)
        self.topics = Topics(
            self.settings.input_topic,
            self.settings.validations_topic,
            self.settings.state_topic,
            self.settings.watermarks_topic,
        )
        self._logs = 0

    def problem(self, text: str) -> None:
        self.problems.append(f"seed={self.seed} phase {self.phase}: {text}")
        print(f"[system seed={self.seed}] phase {self.phase} PROBLEM {text}", flush=True)

    def _spawn(self, label: str, argv: list[str]) -> Instance:
        self._logs += 1
        instance = Instance(argv, self.workdir / "logs" / f"{self._logs:03d}-{label}.log", None)
        self.started.append(instance)
        return instance

    def run_flags(self, **flags: object) -> list[str]:
        values: dict[str, object] = {
            "topic_partitions": PARTITIONS,
            "snapshot_every": 50,
            "keep_snapshots": 2,
            "session_timeout_ms": 6000,
            "default_num_to_keep": DEFAULT_KEEP,
            "max_depth": MAX_DEPTH,
            "max_payload_bytes": MAX_PAYLOAD_BYTES,
            "finished_runs_kept": FINISHED_KEPT,
            **flags,
        }
        return run_argv(self.settings, **values)[3:]

    async def start(self) -> None:
        await ensure_topics(self.conn, topic_specs(self.settings), PARTITIONS)
        self.processors.append(await self.start_processor("main", group_instance_id="system-main"))
        self.start_evaluator()

    async def start_processor(self, label: str, **flags: object) -> Instance:
        """A `ckptlog run`, once it caught up on its share of the partitions (half, with a joiner)."""
        instance = self._spawn(label, self.run_flags(**flags))
        share = PARTITIONS if label == "main" and len(self.processors) <= 1 else PARTITIONS // 2
        if not await instance.caught_up(share, STEP_TIMEOUT_S):
            self.problem(f"processor {label} did not catch up (exit {instance.proc.poll()}); see {instance.log}")
        return instance

    def start_evaluator(self) -> None:
        fn = EVALUATOR_FNS[self.evaluator_kind % 2]
        argv = [
            "evaluate",
            "--fn",
            fn,
            "--bootstrap-servers",
            self.bootstrap,
            "--group-id",
            f"{self.settings.group_id}-ev",
        ]
        argv += ["--events-topic", self.settings.input_topic, "--validations-topic", self.settings.validations_topic]
        argv += ["--session-timeout-ms", "6000", "--concurrency", "3"]
        self.evaluator = self._spawn(f"evaluate-{fn.rsplit('_', 1)[1]}", argv)

    async def evaluator_ready(self, evaluator: Instance) -> None:
        """Until it joined its group (a SIGTERM before the CLI handles signals is no clean stop)."""
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while "event=partitions_assigned" not in evaluator.text() and evaluator.proc.poll() is None:
            if time.monotonic() > deadline:
                self.problem(f"the evaluator joined no group within {STEP_TIMEOUT_S:.0f}s; see {evaluator.log}")
                return
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        for instance in self.processors:
            await self.stop_instance(instance, "processor")
        if self.evaluator is not None:
            await self.stop_instance(self.evaluator, "evaluator")
        for instance in self.started:
            instance.kill()

    async def stop_instance(self, instance: Instance, what: str) -> None:
        code = await instance.stop()
        if code != 0:
            self.problem(
                f"{what} {instance.log.name} did not stop cleanly on SIGTERM (exit {code}); see {instance.log}"
            )

    # -- a phase ---------------------------------------------------------------------------

    async def revive(self) -> None:
        """Restart what died in the last phase (its death was reported by the checks)."""
        for i, instance in enumerate(self.processors):
            if instance.proc.poll() is not None:
                label = "main" if i == 0 else "joiner"
                flags = {"group_instance_id": "system-main"} if i == 0 else {}
                self.processors[i] = await self.start_processor(label, **flags)
        if self.evaluator is not None and self.evaluator.proc.poll() is not None:
            self.start_evaluator()

    async def act(self, action: str) -> None:
        """The phase's action, before its records are produced (`leave` ends a rebalance)."""
        main = self.processors[0]
        if action in ("sigterm", "sigkill"):
            main.proc.send_signal(signal.SIGTERM if action == "sigterm" else signal.SIGKILL)
            code = await main.exit_code(STEP_TIMEOUT_S)
            if code != (0 if action == "sigterm" else KILLED):
                self.problem(f"{action}: the processor exited {code}; see {main.log}")
            main.kill()
            self.processors[0] = await self.start_processor("main", group_instance_id="system-main")
        elif action == "rebalance":
            self.processors.append(await self.start_processor("joiner"))
        elif action == "leave":
            joiner = self.processors.pop()
            await self.stop_instance(joiner, "joining processor")
        elif action == "limits":
            await self.other_limits()
        elif action == "damage":
            await self.damaged_snapshots()
        elif action == "evaluator" and self.evaluator is not None:
            await self.evaluator_ready(self.evaluator)
            await self.stop_instance(self.evaluator, "evaluator")
            self.evaluator_kind += 1
            self.start_evaluator()

    async def damaged_snapshots(self) -> None:
        """SIGKILL, then the newest delta of each partition's snapshot chain lost (even phases) or
        torn (odd ones): the restart must fall back to an older restore point (contract §6)."""
        main, s = self.processors[0], self.settings
        main.proc.send_signal(signal.SIGKILL)
        if (code := await main.exit_code(STEP_TIMEOUT_S)) != KILLED:
            self.problem(f"damage: the processor exited {code}; see {main.log}")
        main.kill()
        fault = snapshot_faults.FAULTS[int(self.phase) % 2]
        hit = snapshot_faults.damage(s.snapshots, s.input_topic, PARTITIONS, fault, s.snapshot_storage_options)
        print(f"[system seed={self.seed}] phase {self.phase}: {fault} {hit}", flush=True)
        self.processors[0] = await self.start_processor("main", group_instance_id="system-main")

    async def other_limits(self) -> None:
        """Restart with another --max-depth: a snapshot folded with other limits must be refused
        (contract §6: the fold settings it was folded with), not continued silently."""
        await self.stop_instance(self.processors[0], "processor")
        other = self._spawn("other-limits", self.run_flags(group_instance_id="system-main", max_depth=OTHER_MAX_DEPTH))
        caught = await other.caught_up(PARTITIONS, STEP_TIMEOUT_S / 2)
        if caught or other.proc.poll() is None:
            self.problem(
                f"a restart with --max-depth {OTHER_MAX_DEPTH} (snapshots folded with {MAX_DEPTH}) was accepted and "
                f"continued silently{' (caught up)' if caught else ''}; see {other.log}"
            )
        elif other.proc.poll() != 1 or "max_depth" not in other.text().replace("-", "_"):
            self.problem(f"the restart with other limits exited {other.proc.poll()} without naming max_depth")
        await other.stop()
        self.processors[0] = await self.start_processor("main", group_instance_id="system-main")

    async def produce(self, phase: Phase) -> None:
        producer = IdempotentProducer(self.conn)
        await producer.start()
        try:
            topic = self.settings.input_topic
            await producer.publish([OutRecord(topic, ln.key, ln.value, partition=ln.partition) for ln in phase.lines])
        finally:
            await producer.stop()

    async def settle(self) -> list[Record]:
        """Wait until every input record is committed by the group, nothing changed for a while
        (the deleter's completions come back as input), and every validation request has its
        result; returns the input topic as read then."""
        deadline, last, stable, since = time.monotonic() + SETTLE_TIMEOUT_S, -1, 0, time.monotonic()
        while True:
            records = await read_topic(self.conn, self.settings.input_topic)
            ends: dict[int, int] = {}
            for record in records:
                ends[record.partition] = record.offset + 1
            committed = await self.committed()
            done = all(committed.get(p, 0) >= end for p, end in ends.items())
            stable = stable + 1 if done and len(records) == last else 0
            since, last = since if stable else time.monotonic(), len(records)
            if stable >= 3 and (await self.answered(records) or time.monotonic() - since > ANSWER_WAIT_S):
                return records  # a request still unanswered then is a problem the checks report
            if time.monotonic() > deadline:
                self.problem(f"not settled after {SETTLE_TIMEOUT_S:.0f}s: committed {committed}, log ends {ends}")
                return records
            await asyncio.sleep(0.7)

    async def committed(self) -> dict[int, int]:
        try:
            return await committed_offsets(self.conn, self.settings.group_id, self.settings.input_topic, PARTITIONS)
        except KafkaIOError:  # the group's coordinator not there yet
            return {}

    async def answered(self, records: list[Record]) -> bool:
        from tests.reliability.system_checks import unanswered

        return not unanswered(await read_topic(self.conn, self.settings.validations_topic), records)

    async def cli(self, *argv: str, timeout_s: float = 120.0) -> Cli:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ckptlog.cli", *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
        except TimeoutError:
            proc.kill()
            out, err = await proc.communicate()
            return Cli(list(argv), None, out, err + b"\n(timed out)")
        return Cli(list(argv), proc.returncode, out, err)
