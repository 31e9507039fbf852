"""The processor against a real broker: views, dead letters, snapshots + replay, truncated logs."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ckptlog.errors import OffsetOutOfRange
from ckptlog.kafka import KafkaConnection, delete_prefix, read_topic
from ckptlog.processor.core.snapshot import decode
from ckptlog.processor.service.harness import (
    checkpoint_paths,
    expected_views,
    produce_events,
    running,
    wait_for_views,
    workload,
)
from ckptlog.processor.service.processor import Processor
from ckptlog.processor.service.records import H_OFFSET, H_PARTITION, H_REASON, H_STAGE, H_TOPIC
from ckptlog.processor.service.replay import rebuild
from ckptlog.processor.service.settings import ServiceSettings, load_settings
from ckptlog.processor.storage.snapshots import SnapshotStore

pytestmark = pytest.mark.timeout(120)

COMPACT = {"cleanup.policy": "compact"}


async def make_settings(
    topic_factory: Any, bootstrap: str, tmp_path: Path, partitions: int = 1, **overrides: Any
) -> ServiceSettings:
    """Isolated topics (created by the fixture, deleted afterwards) and storage under tmp_path."""
    topics = {"input_topic": await topic_factory(partitions, prefix="in")}
    for name in ("checkpoints", "validations", "watermarks", "dlq"):
        topics[f"{name}_topic"] = await topic_factory(partitions, prefix=name)
    topics["state_topic"] = await topic_factory(partitions, COMPACT, prefix="state")
    (tmp_path / "runs").mkdir(exist_ok=True)
    values: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": f"g-{topics['input_topic']}",
        "snapshots": str(tmp_path / "snapshots"),
        "storage_root": (tmp_path / "runs").as_uri(),
        "poll_timeout_ms": 50,
        **topics,
    }
    values.update(overrides)
    return load_settings(None, **values)


def make_dirs(lines: list[bytes]) -> list[Path]:
    dirs = [Path(p.removeprefix("file://")) for p in checkpoint_paths(lines)]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
        (d / "model.pt").write_bytes(b"weights")
    return dirs


def conn_of(settings: ServiceSettings) -> KafkaConnection:
    assert settings.bootstrap_servers is not None
    return settings.connection(settings.bootstrap_servers)


async def test_views_equal_offline_fold_and_evicted_checkpoints_are_deleted(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path)
    lines = workload((tmp_path / "runs").as_uri(), runs=3, reports=90, keep=2)
    make_dirs(lines)
    expected = expected_views(lines, settings)
    conn = conn_of(settings)
    async with running(settings):
        await produce_events(conn, settings.input_topic, lines)
        views = await wait_for_views(conn, settings.state_topic, expected)
        assert views == expected
        evicted = [
            Path(p.removeprefix("file://")) for p in itertools.chain.from_iterable(_evicted(lines, settings).values())
        ]
        await _eventually(lambda: not any(p.exists() for p in evicted))
    kept = [Path(c["path"].removeprefix("file://")) for v in views.values() for c in v["checkpoints"]]
    assert kept and all(p.is_dir() for p in kept)
    assert evicted and not any(p.exists() for p in evicted)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ckptlog.cli",
            "inspect",
            "--json",
            "--bootstrap-servers",
            kafka_bootstrap,
            "--state-topic",
            settings.state_topic,
            "--dlq-topic",
            settings.dlq_topic,
        ],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert json.loads(out.stdout) == {"runs": expected, "rejections": {}, "warnings": {}, "undecodable": []}


def _evicted(lines: list[bytes], settings: ServiceSettings) -> dict[str, list[str]]:
    from ckptlog.processor.foldfile import fold_lines

    return fold_lines(lines, settings.fold_settings()).evicted


async def _eventually(check: Any, timeout_s: float = 20.0) -> None:
    import asyncio
    import time

    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.1)


async def test_dead_letters_keep_original_bytes_with_reason_headers(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, max_payload_bytes=4096)
    root = (tmp_path / "runs").as_uri()
    good = workload(root, runs=2, reports=10, keep=None, validation_share=0.0)
    bad = [
        b"not json",
        b"\xff\xfe{",
        b'{"specversion":"1.0"}',
        b"{" + b'"x":' * 1 + b'"' + b"a" * 5000 + b'"}',
        json.dumps(
            {
                "specversion": "1.0",
                "id": "o1",
                "source": "t",
                "type": "ckptlog.report.v1",
                "subject": "run-0",
                "data": {"metrics": {}, "checkpoint": {"path": "file:///elsewhere/x"}},
            }
        ).encode(),
    ]
    lines = good[:5] + bad + good[5:]
    expected = expected_views(lines, settings)
    conn = conn_of(settings)
    async with running(settings):
        await produce_events(conn, settings.input_topic, lines)
        assert await wait_for_views(conn, settings.state_topic, expected) == expected
    dead = await read_topic(conn, settings.dlq_topic)
    assert [r.value for r in dead] == bad
    reasons = [dict(r.headers)[H_REASON].decode() for r in dead]
    assert reasons == ["invalid_json", "invalid_utf8", "invalid_envelope", "payload_too_large", "path_outside_root"]
    for record, offset in zip(dead, range(5, 10), strict=False):
        headers = dict(record.headers)
        assert headers[H_TOPIC].decode() == settings.input_topic
        assert (headers[H_PARTITION], headers[H_OFFSET]) == (b"0", str(offset).encode())
    assert dict(dead[-1].headers)[H_STAGE] == b"fold"


async def test_restart_from_snapshot_plus_replay_equals_full_replay(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path, snapshot_every=25)
    lines = workload((tmp_path / "runs").as_uri(), runs=3, reports=120, keep=3)
    make_dirs(lines)
    conn = conn_of(settings)
    half = len(lines) // 2
    async with running(settings):
        await produce_events(conn, settings.input_topic, lines[:half])
        await wait_for_views(conn, settings.state_topic, expected_views(lines[:half], settings))
    store = SnapshotStore(settings.snapshots, settings.input_topic, 0)
    assert store.list_offsets(), "a snapshot is written at shutdown"
    expected = expected_views(lines, settings)
    async with running(settings):  # restores from the snapshot
        await produce_events(conn, settings.input_topic, lines[half:])
        assert await wait_for_views(conn, settings.state_topic, expected) == expected
    full = await rebuild(settings, kafka_bootstrap, str(tmp_path / "full"))
    partial = await rebuild(settings, kafka_bootstrap, str(tmp_path / "partial"), from_snapshot=settings.snapshots)
    assert partial[0].start > 0 and full[0].start == 0
    assert full[0].next_offset == partial[0].next_offset
    assert Path(full[0].url).read_bytes() == Path(partial[0].url).read_bytes()
    decoded = decode(Path(full[0].url).read_bytes())
    assert set(decoded.runs) == set(expected)


async def test_truncated_log_is_refused_unless_data_loss_is_allowed(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await make_settings(topic_factory, kafka_bootstrap, tmp_path)
    lines = workload((tmp_path / "runs").as_uri(), runs=2, reports=30, keep=None, validation_share=0.0)
    conn = conn_of(settings)
    await produce_events(conn, settings.input_topic, lines)
    assert await delete_prefix(conn, settings.input_topic, 0, 10) == 10
    with pytest.raises(OffsetOutOfRange, match=r"\[0\].*log now starts at offset 10.*--allow-data-loss"):
        await Processor(settings).run()
    allowed = load_settings(None, **{**settings.model_dump(), "allow_data_loss": True})
    async with running(allowed):
        expected = expected_views(lines[10:], settings)
        assert await wait_for_views(conn, settings.state_topic, expected) == expected
