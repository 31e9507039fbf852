"""History, explain and --as-of against a real processor (contract §10): random streams over
several runs and two input partitions, real checkpoint directories, the processor's own outputs
as the ground truth, and every reader (the CLI, `AsyncReader`) asked the same questions.

- every evicted path's `explain` names the input record whose folding the processor's own
  `checkpoint_evicted` output (its id names the input record) first evicted it, with that reason;
- every kept path (the processor's VIEW on the state topic) is explained as kept;
- `--as-of` at random offsets equals `ckptlog fold` of the records up to there;
- an unknown run or path: `state: unknown`, exit 1, a message, no traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlog import AsyncReader, Topics
from ckptlog.events.outputs import CHECKPOINT_EVICTED, OutputEnvelope
from ckptlog.kafka import read_topic
from ckptlog.kafka.producers import produce
from ckptlog.kafka.reader import TopicReader
from ckptlog.kafka.records import PartitionId
from ckptlog.kafka.topics import committed_offsets
from ckptlog.processor.explain.checkpoint import explain, path_key
from ckptlog.processor.explain.client import History
from ckptlog.processor.explain.source import history_of, views_as_of
from ckptlog.processor.foldfile import fold_lines
from ckptlog.processor.service.harness import event_record, running
from ckptlog.processor.service.settings import ServiceSettings
from tests import factories as f
from tests.integration.test_processor_e2e import conn_of, make_settings

pytestmark = pytest.mark.timeout(600)
RUNS = ("a", "b", "c")  # and d{i}: runs started in a's root (refused)

Op = tuple[str, str, float]


def materialize(ops: list[Op], root: Path) -> list[bytes]:
    """The ops as input lines, with a real directory per reported checkpoint."""
    lines = [f.started(run, (root / run).as_uri(), keep=2, attr="acc") for run in RUNS[:2]]  # c: implicit root
    for i, (kind, run, score) in enumerate(ops):
        path = root / run / f"c{i}"
        if kind == "report":
            path.mkdir(parents=True)
            (path / "weights").write_bytes(b"w")
            lines.append(f.report(run, {"acc": score}, path.as_uri(), validation=score > 0.8))
        elif kind == "result":
            target = next((p for p in sorted((root / run).glob("c*"), reverse=True)), path)
            lines.append(f.result(run, target.as_uri(), "VALIDATED", {"acc": score}))
        elif kind == "restart":
            lines.append(f.restart(run))
        elif kind == "hostile":
            lines.append(f.started(f"d{i}", (root / "a").as_uri()))  # another run's root: refused
        else:
            lines.append(b"not json")
    return lines


OPS = st.lists(
    st.tuples(
        st.sampled_from(["report"] * 6 + ["result", "restart", "hostile", "garbage"]),
        st.sampled_from(RUNS),
        st.floats(0, 1, allow_nan=False).map(lambda x: round(x, 3)),
    ),
    min_size=5,
    max_size=30,
)


async def settled(settings: ServiceSettings, timeout_s: float = 60.0) -> dict[int, int]:
    """Wait until the processor committed every input record (deletion completions included)."""
    conn, pids = conn_of(settings), [PartitionId(settings.input_topic, p) for p in range(2)]
    deadline, stable = time.monotonic() + timeout_s, 0
    while True:
        async with TopicReader(conn, settings.input_topic) as reader:
            ends = {pid.partition: reader.end[pid] for pid in pids}
        done = await committed_offsets(conn, settings.group_id, settings.input_topic, 2)
        stable = stable + 1 if all(done.get(p, 0) >= end for p, end in ends.items()) else 0
        if stable >= 3:
            return ends
        assert time.monotonic() < deadline, f"not settled: committed {done}, ends {ends}"
        await asyncio.sleep(0.3)


async def processor_evictions(settings: ServiceSettings) -> dict[tuple[str, str], list[tuple[int, dict[str, Any]]]]:
    """(run, path key) -> [(input offset, reason)] from the processor's checkpoint_evicted outputs."""
    found: dict[tuple[str, str], list[tuple[int, dict[str, Any]]]] = {}
    for record in await read_topic(conn_of(settings), settings.checkpoints_topic):
        out = OutputEnvelope.model_validate_json(record.value or b"")
        if out.type == CHECKPOINT_EVICTED.type:
            offset = int(out.id.split(":")[3])
            found.setdefault((out.subject, path_key(out.data["checkpoint_path"])), []).append(
                (offset, out.data["reason"])
            )
    return found


async def check_explanations(settings: ServiceSettings, tmp_path: Path) -> None:
    conn = conn_of(settings)
    evictions = await processor_evictions(settings)
    topics = Topics(settings.input_topic, settings.validations_topic, settings.state_topic, settings.watermarks_topic)
    async with (
        AsyncReader(connection=conn, topics=topics) as reader,
        History(connection=conn, processor=settings) as api,
    ):
        views = await reader.runs()
        for run_id in RUNS:
            replay = (await history_of(conn, settings, run_id)).replay
            steps, state = replay.steps[run_id], replay.state(run_id)
            kept = {path_key(c.path) for c in (views[run_id].checkpoints if run_id in views else [])}
            reported = {e["path"] for s in steps for e in s.effects if e["kind"] == "registered"}
            for path in reported:
                doc = explain(run_id, path, steps, state)
                if path_key(path) in kept:
                    assert doc["state"] in ("kept", "latest", "pending", "preserved"), doc
                    continue
                offset, reason = evictions[(run_id, path_key(path))][-1]
                assert doc["evicted"]["offset"] == offset and doc["evicted"]["reason"] == reason, doc
                on_disk = Path(path.removeprefix("file://")).exists()
                assert doc["state"] in ("deleted", "evicted"), doc
                assert (doc["state"] == "deleted") == (not on_disk), doc
            assert [s["offset"] for s in await api.history(run_id)] == [s.offset for s in steps]
            assert (await api.explain(run_id, "file:///nowhere/x"))["state"] == "unknown"


async def check_as_of(
    settings: ServiceSettings, lines_by_partition: dict[int, list[tuple[int, bytes]]], data: Any
) -> None:
    conn = conn_of(settings)
    for partition, records in lines_by_partition.items():
        if not records:
            continue
        index = data.draw(st.integers(0, len(records) - 1), label=f"as-of index in partition {partition}")
        offset = records[index][0]
        expected = fold_lines([raw + b"\n" for _, raw in records[: index + 1]], settings.fold_settings()).document()
        runs = [r for r in RUNS if r in expected["runs"]]
        found = await views_as_of(conn, settings, runs, offset)
        async with History(connection=conn, processor=settings) as api:
            for run_id in runs:
                view = dict(expected["runs"][run_id])
                view.pop("evicted")
                assert json.dumps(found.views[run_id], sort_keys=True) == json.dumps(view, sort_keys=True)
                python = await api.view(run_id, as_of=offset)
                assert python is not None and python.model_dump(mode="json")["committed"] == view["committed"]


def partition_lines(settings: ServiceSettings, records: list[Any]) -> dict[int, list[tuple[int, bytes]]]:
    """Input records by partition (offset, value), written by the test only (no completions)."""
    out: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    for r in records:
        if r.value is not None and b"deletion_completed" not in r.value:
            out[r.partition].append((r.offset, r.value))
    return out


@settings(
    max_examples=3,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=OPS, data=st.data())
async def test_history_and_explain_agree_with_the_processors_decisions(
    topic_factory: Any, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory, ops: list[Op], data: Any
) -> None:
    tmp_path = tmp_path_factory.mktemp("history")
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, partitions=2, snapshot_every=7)
    lines = materialize(ops, tmp_path / "runs")
    async with running(settings):
        await produce(conn_of(settings), [event_record(settings.input_topic, line) for line in lines])
        await settled(settings)
    await check_explanations(settings, tmp_path)
    records = await read_topic(conn_of(settings), settings.input_topic)
    await check_as_of(settings, partition_lines(settings, records), data)


async def test_the_cli_explains_and_refuses_unknowns_clearly(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, partitions=2, snapshot_every=2)
    root = tmp_path / "runs" / "a"
    lines = [f.started("a", root.as_uri(), keep=1, attr="acc")]
    for i, score in enumerate([0.2, 0.9, 0.5]):
        (root / f"c{i}").mkdir(parents=True)
        lines.append(f.report("a", {"acc": score}, (root / f"c{i}").as_uri(), event_id=f"rep-{i}"))
    async with running(settings):
        await produce(conn_of(settings), [event_record(settings.input_topic, line) for line in lines])
        await settled(settings)
    flags = [
        f"--bootstrap-servers={kafka_bootstrap}",
        f"--input-topic={settings.input_topic}",
        f"--snapshots={settings.snapshots}",
    ]  # no --storage-root: the fold settings are the processor's snapshots'

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CKPTLOG_")}
        command = [sys.executable, "-m", "ckptlog", *args, *flags]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)

    evicted = cli("explain", "a", (root / "c0").as_uri(), "--json")
    assert evicted.returncode == 0, evicted.stderr
    doc = json.loads(evicted.stdout)
    assert doc["state"] == "deleted" and doc["reported"]["id"] == "rep-0"
    assert doc["evicted"]["reason"]["rank"] == 2 and doc["evicted"]["reason"]["num_to_keep"] == 1
    plain = cli("explain", "a", (root / "c1").as_uri())
    assert plain.returncode == 0 and "KEPT" in plain.stdout and "ranks 1st" in plain.stdout, plain.stdout
    unknown = cli("explain", "a", (root / "zzz").as_uri(), "--json")
    assert unknown.returncode == 1 and json.loads(unknown.stdout)["state"] == "unknown"
    assert "never reported that path" in unknown.stderr and "Traceback" not in unknown.stderr
    said = cli("explain", "a", (root / "zzz").as_uri())  # issue 38 item 8: said once, not as a paragraph and an error
    assert said.returncode == 1 and said.stdout == "", said.stdout
    assert said.stderr.startswith("error: checkpoint ") and said.stderr.count("\n") == 1, said.stderr
    assert "is unknown: run 'a' never reported that path" in said.stderr
    nobody = cli("history", "nobody")
    assert nobody.returncode == 1 and "has no events" in nobody.stderr and "Traceback" not in nobody.stderr
    story = cli("history", "a", "--json")
    steps = [json.loads(line) for line in story.stdout.splitlines()]
    assert [s["type"] for s in steps[:4]] == ["ckptlog.run_started.v1"] + ["ckptlog.report.v1"] * 3
    assert all({"offset", "id", "type", "effects"} <= set(s) for s in steps)
    assert any(e["kind"] == "deleted" for s in steps for e in s["effects"])
    as_of = cli("inspect", "a", "--as-of", str(steps[2]["offset"]), "--json")
    assert as_of.returncode == 0, as_of.stderr
    assert f"through offset {steps[2]['offset']}" in as_of.stderr, as_of.stderr  # not "up to" the next one
    view = json.loads(as_of.stdout)["runs"]["a"]
    assert view["committed"] == 2 and [c["path"] for c in view["checkpoints"]] == [(root / "c1").as_uri()]
