"""History, explain and --as-of attacked with hostile and careless input, against a real broker
and a real processor (issue 22): never a traceback; unknowns exit 1 with a message that names the
object and what to do; answers equal the processor's own decisions and `ckptlog fold`."""

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

from ckptlog.errors import ConfigError
from ckptlog.kafka import read_topic
from ckptlog.kafka.producers import produce
from ckptlog.kafka.reader import TopicReader, partition_of
from ckptlog.kafka.records import OutRecord
from ckptlog.kafka.topics import committed_offsets, delete_prefix
from ckptlog.processor.explain.source import history_of, views_as_of
from ckptlog.processor.foldfile import fold_lines
from ckptlog.processor.service.harness import event_record, running
from ckptlog.processor.service.settings import ServiceSettings
from ckptlog.processor.storage.snapshots import SnapshotStore
from tests import factories as f
from tests.integration.test_processor_e2e import conn_of, make_settings

pytestmark = pytest.mark.timeout(600)


def checkpoint(root: Path, run: str, name: str) -> str:
    path = root / run / name
    path.mkdir(parents=True, exist_ok=True)
    (path / "weights").write_bytes(b"w")
    return path.as_uri()


def cli_of(settings: ServiceSettings, **overrides: str) -> Any:
    flags = {
        "bootstrap-servers": settings.bootstrap_servers or "",
        "input-topic": settings.input_topic,
        "snapshots": settings.snapshots,
        **overrides,
    }

    def cli(*args: str | bytes) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CKPTLOG_")}
        command = [sys.executable, "-m", "ckptlog", *args, *(f"--{k}={v}" for k, v in flags.items())]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, errors="replace")
        assert "Traceback" not in done.stderr, done.stderr
        return done

    return cli


async def settled_all(settings: ServiceSettings, partitions: int = 1, timeout_s: float = 60.0) -> None:
    """Wait until the processor committed every record of its input partitions."""
    conn, stable, deadline = conn_of(settings), 0, time.monotonic() + timeout_s
    while stable < 3:
        async with TopicReader(conn, settings.input_topic) as reader:
            ends = {pid.partition: end for pid, end in reader.end.items()}
        done = await committed_offsets(conn, settings.group_id, settings.input_topic, partitions)
        stable = stable + 1 if all(done.get(p, 0) >= end for p, end in ends.items()) else 0
        assert time.monotonic() < deadline, f"not settled: committed {done}, ends {ends}"
        await asyncio.sleep(0.3)


async def run_lines(settings: ServiceSettings, lines: list[bytes]) -> None:
    async with running(settings):
        await produce(conn_of(settings), [event_record(settings.input_topic, line) for line in lines])
        await settled_all(settings)


async def test_finished_forgotten_and_hostile_moments(topic_factory: Any, kafka_bootstrap: str, tmp_path: Path) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, partitions=1, snapshot_every=3)
    root = tmp_path / "runs"
    lines = [f.started("fin", (root / "fin").as_uri(), keep=3, attr="acc")]
    lines += [f.report("fin", {"acc": s}, checkpoint(root, "fin", f"c{i}")) for i, s in enumerate([0.2, 0.9, 0.5])]
    lines += [f.finished("fin", keep="best")]  # offset 4: evicts c0, retires fin once c0's deletion settles
    lines += [f.started("gone", (root / "gone").as_uri(), keep=3), f.report("gone", {}, checkpoint(root, "gone", "c0"))]
    lines += [f.forgotten("gone")]  # offset 7
    lines += [f.started("z", (root / "z").as_uri()), f.report("z", {}, checkpoint(root, "z", "c0"))]
    await run_lines(settings, lines)
    cli = cli_of(settings)
    records = await read_topic(conn_of(settings), settings.input_topic)
    end = records[-1].offset

    # a forgotten run: the processor tombstoned its VIEW; its path is not "kept"
    gone = cli("explain", "gone", (root / "gone" / "c0").as_uri(), "--json")
    assert gone.returncode == 1 and json.loads(gone.stdout)["state"] == "unknown", gone.stdout
    assert "forgotten" in gone.stderr and "never reported" not in gone.stderr, gone.stderr

    # --as-of equals `ckptlog fold` of the prefix, wherever the processor's snapshots lie
    for offset in range(end + 1):
        prefix = [r.value + b"\n" for r in records if r.offset <= offset and r.value is not None]
        expected = fold_lines(prefix, settings.fold_settings()).document()["runs"]
        for run_id in ("fin", "gone"):
            found = cli("inspect", run_id, "--as-of", str(offset), "--json")
            assert (run_id in json.loads(found.stdout)["runs"]) == (run_id in expected), (run_id, offset, found)
            assert found.returncode == (0 if run_id in expected else 1)
            if run_id not in expected:
                assert "no view on" not in found.stderr, found.stderr  # it did not read the state topic
                assert f"had no state as of {offset}" in found.stderr, found.stderr

    # times before the epoch (before every record): the state before the log, not a traceback
    for flag in (["inspect", "z", "--as-of"], ["history", "z", "--to"], ["history", "z", "--from"]):
        done = cli(*flag, "1969-07-20T20:17:00Z")
        assert done.returncode in (0, 1), done.stderr
    before = cli("inspect", "z", "--as-of", "0001-01-01T00:00:00Z", "--json")
    assert before.returncode == 1 and json.loads(before.stdout)["runs"] == {}
    assert cli("history", "z", "--from", "1969-07-20T20:17:00Z").returncode == 0  # every event is after it

    # a run id or path that is not text (a shell passing raw bytes): an error that names it, exit 2
    for args in (["history", b"r\xff"], ["explain", "z", b"file:///x/\xff"], ["inspect", b"r\xff", "--as-of", "3"]):
        done = cli(*args)
        assert done.returncode == 2 and "UTF-8" in done.stderr, done.stderr


async def test_retention_below_a_snapshot(topic_factory: Any, kafka_bootstrap: str, tmp_path: Path) -> None:
    """delete_records truncates the input log below a snapshot: explain still says what the
    processor's VIEW says for a path reported before it; --as-of at the cut equals the fold of the
    prefix; without the snapshots, an error that names the offset and --snapshots."""
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, partitions=1, snapshot_every=2)
    root = tmp_path / "runs"
    lines = [f.started("a", (root / "a").as_uri(), keep=2, attr="acc")]
    scores = [0.2, 0.99, 0.5, 0.3, 0.4, 0.1, 0.35]
    lines += [
        f.report("a", {"acc": s}, checkpoint(root, "a", f"c{i}"), event_id=f"a-{i}") for i, s in enumerate(scores)
    ]
    await run_lines(settings, lines)
    conn = conn_of(settings)
    records = await read_topic(conn, settings.input_topic)
    store = SnapshotStore(settings.snapshots, settings.input_topic, 0)
    # The oldest snapshot kept above c1's report (offset 2). Which ones are kept depends on timing:
    # the processor's deletion completions follow the reports in the input log, and snapshots at
    # them prune older ones; the final snapshot (at the log's end) always is.
    cut = min(o for o in store.list_offsets() if o >= 3)
    assert await delete_prefix(conn, settings.input_topic, 0, cut) == cut
    cli = cli_of(settings)

    kept = cli("explain", "a", (root / "a" / "c1").as_uri(), "--json")
    assert kept.returncode == 0, kept.stderr
    doc = json.loads(kept.stdout)
    assert doc["state"] == "kept" and doc["reported"]["report_index"] == 1, doc
    assert "retention" in kept.stderr
    assert "KEPT" in cli("explain", "a", (root / "a" / "c1").as_uri()).stdout

    prefix = [r.value + b"\n" for r in records if r.offset < cut and r.value is not None]
    expected = fold_lines(prefix, settings.fold_settings()).document()["runs"]["a"]
    expected.pop("evicted")
    at_cut = cli("inspect", "a", "--as-of", str(cut - 1), "--json")
    assert at_cut.returncode == 0, at_cut.stderr
    assert json.dumps(json.loads(at_cut.stdout)["runs"]["a"], sort_keys=True) == json.dumps(expected, sort_keys=True)

    below = cli("inspect", "a", "--as-of", str(cut - 2), "--json")
    assert below.returncode == 1 and f"offset {cut}" in below.stderr and "--snapshots" in below.stderr

    lost = cli_of(settings, snapshots=str(tmp_path / "elsewhere"))
    for args in (["history", "a"], ["explain", "a", (root / "a" / "c1").as_uri()]):
        done = lost(*args)
        assert done.returncode == 1 and f"offset {cut}" in done.stderr and "--snapshots" in done.stderr, done.stderr


async def test_events_on_another_partition_than_the_run_ids(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A keyless event (placed by the producer, not by run id) and a run produced to an explicit
    partition: the processor folded them where they landed (its checkpoint_registered says so);
    history and explain read the run id's partition only, so they must say where the events are
    instead of "never reported" / "check the run id"."""
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, partitions=2, snapshot_every=3)
    root = tmp_path / "runs"
    home = partition_of(b"a", 2)
    records = [event_record(settings.input_topic, f.started("a", (root / "a").as_uri(), keep=2))]
    records.append(event_record(settings.input_topic, f.report("a", {}, checkpoint(root, "a", "c0"))))
    stray = f.report("a", {}, checkpoint(root, "a", "c1"), event_id="keyless-1")
    records.append(OutRecord(settings.input_topic, None, stray, partition=1 - home))
    elsewhere = 1 - partition_of(b"x", 2)
    for line in (f.started("x", (root / "x").as_uri()), f.report("x", {}, checkpoint(root, "x", "c0"))):
        records.append(OutRecord(settings.input_topic, b"x", line, partition=elsewhere))
    async with running(settings):
        await produce(conn_of(settings), records)
        await settled_all(settings, 2)
    registered = [
        r.value
        for r in await read_topic(conn_of(settings), settings.checkpoints_topic)
        if b"checkpoint_registered" in (v := r.value or b"") and (root / "a" / "c1").as_uri().encode() in v
    ]
    assert registered, "the processor registered the keyless report on the partition it landed on"
    cli = cli_of(settings)
    stray_path = cli("explain", "a", (root / "a" / "c1").as_uri())
    assert stray_path.returncode == 1
    assert f"{settings.input_topic}[{1 - home}]" in stray_path.stderr and "keyless-1" in stray_path.stderr
    assert "key" in stray_path.stderr, stray_path.stderr
    moved = cli("history", "x")
    assert moved.returncode == 1 and f"{settings.input_topic}[{elsewhere}]" in moved.stderr, moved.stderr
    assert "check the run id" not in moved.stderr


async def test_garbage_moments_from_python_and_the_cli(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, partitions=1)
    root = tmp_path / "runs"
    await run_lines(settings, [f.started("a", (root / "a").as_uri()), f.report("a", {}, checkpoint(root, "a", "c0"))])
    conn = conn_of(settings)
    for moment in (-1, -(10**12)):
        with pytest.raises(ConfigError, match="offset"):
            await views_as_of(conn, settings, ["a"], moment)
        with pytest.raises(ConfigError, match="offset"):
            await history_of(conn, settings, "a", moment)
    cli = cli_of(settings)
    backwards = cli("history", "a", "--from", "1", "--to", "0")
    assert backwards.returncode == 2 and "--from" in backwards.stderr, backwards.stderr
    early = cli("history", "a", "--to", "2026-01-01T00:00:00Z")  # before the run's first event
    assert early.returncode == 1 and "--to" in early.stderr and "check the run id" not in early.stderr, early.stderr


async def test_as_of_a_snapshot_the_log_was_truncated_past(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The log now starts after a snapshot: the state right before that snapshot's offset needs no
    record (the snapshot is it), so --as-of there answers it (equal to the fold of the prefix)."""
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, partitions=1, snapshot_every=2)
    root = tmp_path / "runs"
    lines = [f.started("a", (root / "a").as_uri(), keep=2, attr="acc")]
    lines += [f.report("a", {"acc": s}, checkpoint(root, "a", f"c{i}")) for i, s in enumerate([0.1, 0.9, 0.5, 0.3])]
    await run_lines(settings, lines)
    conn = conn_of(settings)
    records = await read_topic(conn, settings.input_topic)
    cut = min(o for o in SnapshotStore(settings.snapshots, settings.input_topic, 0).list_offsets() if o >= 2)
    await delete_prefix(conn, settings.input_topic, 0, cut + 1)
    prefix = [r.value + b"\n" for r in records if r.offset < cut and r.value is not None]
    expected = fold_lines(prefix, settings.fold_settings()).document()["runs"]["a"]
    expected.pop("evicted")
    found = await views_as_of(conn, settings, ["a"], cut - 1)
    assert json.dumps(found.views["a"], sort_keys=True) == json.dumps(expected, sort_keys=True)
    with pytest.raises(ConfigError, match="UTF-8"):
        await history_of(conn, settings, "r\udcff")


async def test_a_finished_run_whose_events_retention_deleted(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The run finished and left the hot state; retention then deleted its events below a snapshot
    (which remembers only that it finished): not "check the run id", but what is known and where
    its final VIEW is."""
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, partitions=1, snapshot_every=2)
    root = tmp_path / "runs"
    lines = [f.started("fin", (root / "fin").as_uri()), f.report("fin", {}, checkpoint(root, "fin", "c0"))]
    lines += [f.finished("fin"), f.started("z", (root / "z").as_uri())]
    lines += [f.report("z", {}, checkpoint(root, "z", f"c{i}")) for i in range(4)]
    await run_lines(settings, lines)
    conn = conn_of(settings)
    cut = min(o for o in SnapshotStore(settings.snapshots, settings.input_topic, 0).list_offsets() if o >= 3)
    await delete_prefix(conn, settings.input_topic, 0, cut)
    cli = cli_of(settings)
    for args in (["history", "fin"], ["explain", "fin", (root / "fin" / "c0").as_uri()]):
        done = cli(*args)
        assert done.returncode == 1 and "finished" in done.stderr and "check the run id" not in done.stderr, done
        assert "ckptlog inspect" in done.stderr, done.stderr
