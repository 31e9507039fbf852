"""Issue 20 item 6 on a real broker: after the processor rightly rejects an event nested 20,000 levels
deep, `ckptlog inspect --json` failed with a RecursionError (it decoded the dead letter's original
with the standard json module). Here every topic the tools read holds hostile bytes — deep nesting,
5 MB values, invalid UTF-8, non-object JSON, NaN literals, a key that is not UTF-8, binary headers,
a state record that is JSON but not a VIEW, a page key with a huge page number — and every command
exits 0 (or its documented code) and every reader keeps running."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from ckptlog import AsyncReader, Reader, Topics
from ckptlog.client.dead_letters import DeadLetterFeed, read_dead_letters
from ckptlog.events.dead_letters import H_OFFSET, H_REASON
from ckptlog.events.state import input_offset
from ckptlog.kafka.reader import read_topic
from ckptlog.processor.service.harness import expected_views, produce_events, running, wait_for_views
from ckptlog.processor.service.views import read_state_topic
from tests import factories as f
from tests.integration.test_processor_e2e import conn_of, make_settings

pytestmark = pytest.mark.timeout(240)

BIG = {"max.message.bytes": str(16 * 1024 * 1024)}
DEEP = b'{"a":' * 20_000 + b"1" + b"}" * 20_000
HUGE = b'{"specversion": "1.0", "x": "' + b"x" * 5_000_000 + b'"}'
HOSTILE = [DEEP, b"[" * 20_000 + b"]" * 20_000, HUGE, b'{"a": "\xff\xfe"}', b"[1, 2]", b"NaN", b'{"hello": "world"}']


async def _produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None, list[Any]]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_request_size=20 * 1024 * 1024, acks="all")
    await producer.start()
    try:
        for key, value, headers in records:
            await producer.send_and_wait(topic, value, key=key, headers=headers)
    finally:
        await producer.stop()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The command's exit code, stdout and stderr (undecodable bytes replaced: export writes them as they are)."""
    done = subprocess.run([sys.executable, "-m", "ckptlog.cli", *args], capture_output=True, timeout=120, check=False)
    out, err = (stream.decode("utf-8", "replace") for stream in (done.stdout, done.stderr))
    return subprocess.CompletedProcess(done.args, done.returncode, out, err)


async def _settings(topic_factory: Any, bootstrap: str, tmp_path: Path) -> Any:
    settings = await make_settings(topic_factory, bootstrap, tmp_path)
    big = {name: await topic_factory(1, BIG, prefix=name) for name in ("in", "dlq")}
    state = await topic_factory(1, {**BIG, "cleanup.policy": "compact"}, prefix="state")
    return settings.model_copy(update={"input_topic": big["in"], "dlq_topic": big["dlq"], "state_topic": state})


async def test_every_tool_survives_every_hostile_record(
    topic_factory: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = await _settings(topic_factory, kafka_bootstrap, tmp_path)
    root = (tmp_path / "runs").as_uri()
    good = [f.started("good", f"{root}/good", keep=2, attr="acc")]
    good += [f.report("good", {"acc": i, "loss": float("nan")}, f"{root}/good/c{i}") for i in range(4)]
    conn = conn_of(settings)
    async with running(settings):
        await produce_events(conn, settings.input_topic, good)
        await _produce(kafka_bootstrap, settings.input_topic, [(b"evil", v, [("h", b"\xff\x00")]) for v in HOSTILE])
        expected = expected_views(good, settings)
        assert _nan_equal(await wait_for_views(conn, settings.state_topic, expected), expected)
        for _ in range(200):  # the processor dead-letters each (decode stage): wait for all of them
            if len(await read_dead_letters(conn, settings.dlq_topic)) == len(HOSTILE):
                break
            await asyncio.sleep(0.1)
    heads = [r for r in await read_topic(conn, settings.state_topic) if r.key == b"good"]
    assert heads and all(input_offset(r.headers) is not None for r in heads)  # the order readers keep
    letters = await read_dead_letters(conn, settings.dlq_topic)
    assert sorted(letter.reason for letter in letters) == sorted(
        [
            "too_deep",
            "too_deep",
            "payload_too_large",
            "invalid_utf8",
            "invalid_envelope",
            "invalid_envelope",
            "invalid_envelope",
        ]
    )
    await _poison_the_outputs(kafka_bootstrap, settings)
    _check_the_commands(kafka_bootstrap, settings, expected)
    await _check_the_readers(kafka_bootstrap, settings, expected)


async def _poison_the_outputs(bootstrap: str, settings: Any) -> None:
    """What a bug or a stray producer could leave on the state topic and the DLQ."""
    junk: list[tuple[bytes | None, bytes | None, list[Any]]] = [(b"evil", v, [("bin", b"\x00\xff")]) for v in HOSTILE]
    junk += [
        (b"\xff\xfe-not-utf8", b"{}", []),
        (b"good\x1fpage\x1f" + b"9" * 5000 + b"\x1f0", b"{}", []),
        (b"good\x1fpage\x1f99999999999999\x1f0", DEEP, []),
        (b"evil\x1fpage\x1f0\x1f0", HUGE, []),
    ]
    await _produce(bootstrap, settings.state_topic, junk)
    dlq = [(b"\xff\xfe", v, [(H_REASON, b"too_deep"), (H_OFFSET, b"9" * 5000), ("x", b"\xff")]) for v in HOSTILE]
    await _produce(bootstrap, settings.dlq_topic, dlq)
    for topic in (settings.checkpoints_topic, settings.watermarks_topic):
        await _produce(bootstrap, topic, [(b"evil", v, [("bin", b"\xff")]) for v in HOSTILE if len(v) < 1_000_000])


def _check_the_commands(bootstrap: str, settings: Any, expected: dict[str, Any]) -> None:
    common = ["--bootstrap-servers", bootstrap]
    topics = [*common, "--state-topic", settings.state_topic, "--dlq-topic", settings.dlq_topic]
    done = _cli("inspect", "--json", *topics)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert _nan_equal(document["runs"], expected)
    assert document["rejections"]["evil"] == len(HOSTILE)
    reasons = {entry["key"]: entry["undecodable"] for entry in document["undecodable"]}
    assert reasons["evil"].startswith("not a VIEW") and reasons["\\xff\\xfe-not-utf8"].startswith("key is not UTF-8")
    assert all(entry["value"] is None for entry in document["undecodable"])
    done = _cli("inspect", *topics)
    assert done.returncode == 0 and "unreadable records on" in done.stdout and "run good" in done.stdout, done.stderr
    done = _cli("inspect", "evil", *topics)
    assert done.returncode == 1 and "has no readable view" in done.stderr  # documented: a run asked for has no view
    done = _cli("rejections", "--json", *common, "--dlq-topic", settings.dlq_topic)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == 2 * len(HOSTILE)
    assert {line["undecodable"] for line in lines if line["value"] is None} >= {"too deep (>64)", "not UTF-8 (byte 7)"}
    done = _cli("rejections", *common, "--dlq-topic", settings.dlq_topic)
    assert done.returncode == 0 and "rejection(s)" in done.stdout, done.stderr
    for topic in (settings.input_topic, settings.dlq_topic, settings.state_topic, settings.checkpoints_topic):
        done = _cli("export", "-", "--topic", topic, *common)
        assert done.returncode == 0 and "exported" in done.stderr, done.stderr
    done = _cli(
        "watch", "good", "--once", *common, "--state-topic", settings.state_topic, "--dlq-topic", settings.dlq_topic
    )
    assert done.returncode == 0 and "run good" in done.stdout, done.stderr


def _nan_equal(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, allow_nan=True) == json.dumps(b, sort_keys=True, allow_nan=True)


async def _check_the_readers(bootstrap: str, settings: Any, expected: dict[str, Any]) -> None:
    conn = conn_of(settings)
    topics = Topics(state=settings.state_topic)
    state = await read_state_topic(conn, settings.state_topic)
    assert _nan_equal(state.views, expected) and state.problems
    async with AsyncReader(bootstrap_servers=bootstrap, topics=topics) as reader:
        view = await reader.view("good")
        assert view is not None and view.committed == 4 and reader.problem("evil") is not None
        assert set(await reader.runs()) == {"good"}
        kept = await reader.get_all_reported_checkpoints("good", 4, timeout_s=1)
        assert [c.path for c in kept] == [c["path"] for c in expected["good"]["checkpoints"]]
    feed = DeadLetterFeed(conn, settings.dlq_topic)
    await feed.start()
    try:
        await asyncio.wait_for(feed.catch_up(), 30)
        assert feed.counts["evil"] == len(HOSTILE)
    finally:
        await feed.close()

    def sync() -> None:
        with Reader(bootstrap_servers=bootstrap, topics=topics) as reader:
            assert reader.view("good") is not None

    await asyncio.to_thread(sync)
