"""Metrics, /healthz and /readyz of a `Processor` on the in-memory fakes (no broker)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ckptlog.kafka.records import OutRecord
from ckptlog.processor.service import observe
from ckptlog.processor.service.metrics import HOOKED
from ckptlog.processor.service.observe import EXPORTED, STATE
from ckptlog.processor.service.processor import Processor
from tests.unit.service.fakes import FakeClaims, FakeDeleter, FakeKafka
from tests.unit.service.test_processor import INPUT, LINES, P0, P1, produce, settings, settled, until

DOCS = Path(__file__).resolve().parents[3] / "docs"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


async def fetch(processor: Processor, path: str) -> tuple[int, str]:
    """GET from a thread: the server asks the event loop, which must stay free to answer."""
    assert processor.metrics_url is not None
    return await asyncio.to_thread(get, processor.metrics_url + path)


def family(sample: str) -> str:
    """The family a sample belongs to: ckptlog_fold_seconds_bucket -> ckptlog_fold_seconds."""
    for suffix in ("_total", "_bucket", "_count", "_sum", "_created"):
        sample = sample.removesuffix(suffix)
    return sample


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def start(tmp_path: Path, kafka: FakeKafka, **overrides: Any) -> tuple[Processor, asyncio.Task[None]]:
    config = settings(tmp_path, **{"metrics_port": 0, **overrides})
    processor = Processor(
        config, clients=kafka, deleter_factory=lambda **kw: FakeDeleter(kafka, kw["on_done"]), claims_factory=FakeClaims
    )
    return processor, asyncio.create_task(processor.run())


async def test_metrics_count_what_the_processor_did_and_the_probes_answer(tmp_path: Path) -> None:
    kafka = FakeKafka()
    produce(kafka, LINES[:150])
    kafka.append([OutRecord(INPUT, b"bad", b"not json", partition=0)])
    processor, run = start(tmp_path, kafka)
    await until(lambda: processor.metrics_url is not None, run)
    await until(settled(kafka, processor), run)
    status, body = await fetch(processor, "/healthz")
    assert status == 200 and body.startswith("ok")
    status, body = await fetch(processor, "/readyz")
    assert status == 200 and body.startswith("ready: 2 partition(s)")

    status, text = await fetch(processor, "/metrics")
    assert status == 200
    values = samples(text)
    p0 = (("partition", "0"), ("topic", INPUT))
    assert values["ckptlog_events_total", (("type", "report"),)] > 100
    assert values["ckptlog_events_total", (("type", "invalid"),)] == 1
    assert values["ckptlog_events_rejected_total", (("reason", "invalid_json"), ("stage", "decode"))] == 1
    assert values["ckptlog_dead_letters_total", (("reason", "invalid_json"),)] == 1
    watermarks = kafka.values(processor.settings.watermarks_topic)  # one per run per batch (contract §4)
    assert values["ckptlog_outputs_total", (("type", "watermark"),)] == len(watermarks) > 0
    assert values["ckptlog_outputs_total", (("type", "view"),)] > 0
    assert values["ckptlog_transaction_commits_total", ()] > 0
    assert values["ckptlog_batch_records_count", ()] == values["ckptlog_fold_seconds_count", ()] > 0
    assert values["ckptlog_restores_total", ()] == 2 and values["ckptlog_catch_up_seconds_count", ()] == 2
    assert values["ckptlog_snapshots_total", ()] > 0 and values["ckptlog_snapshot_bytes", p0] > 0
    assert values["ckptlog_consumer_lag", p0] == 0
    assert values["ckptlog_committed_offset", p0] == kafka.end(P0) == values["ckptlog_last_folded_offset", p0] + 1
    assert values["ckptlog_kept_checkpoints", p0] > 0 and values["ckptlog_ready", ()] == 1
    assert values["ckptlog_assigned_partitions", ()] == 2 and values["ckptlog_snapshot_age_seconds", p0] >= 0
    assert values["process_resident_memory_bytes", ()] > 0 and ("python_info" in {name for name, _ in values})
    assert {family(name) for name, _ in values if name.startswith("ckptlog_")} <= {family(n) for n in EXPORTED}

    status, _ = await fetch(processor, "/nothing")
    assert status == 404
    processor.stop()
    await run
    with pytest.raises(OSError):  # the server is gone with the processor
        get(processor.metrics_url + "/healthz")  # type: ignore[operator]


async def test_not_ready_until_every_assigned_partition_is_restored(tmp_path: Path, monkeypatch: Any) -> None:
    from tests.unit.service.fakes import FakeConsumer

    kafka = FakeKafka()
    produce(kafka, LINES[:60])
    processor, run = start(tmp_path, kafka)
    assert processor.readiness() == (False, "waiting for the first partition assignment")
    gate = asyncio.Event()
    real_committed = FakeConsumer.committed

    async def slow_committed(self: FakeConsumer, pid: Any) -> int | None:
        if pid == P1:
            await gate.wait()
        return await real_committed(self, pid)

    monkeypatch.setattr(FakeConsumer, "committed", slow_committed)
    await until(lambda: processor.metrics_url is not None, run)
    first = await fetch(processor, "/readyz")
    assert first[0] == 503
    gate.set()
    await until(settled(kafka, processor), run)
    assert (await fetch(processor, "/readyz"))[0] == 200
    processor.stop()
    await run
    assert processor.readiness() == (False, "stopping")


async def test_healthz_fails_when_the_event_loop_or_the_poll_loop_is_stuck(tmp_path: Path, monkeypatch: Any) -> None:
    kafka = FakeKafka()
    processor, run = start(tmp_path, kafka)
    await until(lambda: processor.ready.is_set() and processor.metrics_url is not None, run)
    monkeypatch.setattr(observe, "LOOP_TIMEOUT_S", 0.2)
    answers: list[tuple[int, str]] = []
    request = threading.Thread(target=lambda: answers.append(get(f"{processor.metrics_url}/healthz")))
    request.start()
    time.sleep(0.8)  # noqa: ASYNC251 -- the event loop is blocked on purpose: the server still answers, and says so
    await asyncio.to_thread(request.join)
    ((status, body),) = answers
    assert status == 503 and "event loop did not answer" in body
    monkeypatch.setattr(observe, "STALL_S", 0.0)
    status, body = await fetch(processor, "/healthz")
    assert status == 503 and "poll loop has not gone round" in body
    monkeypatch.setattr(observe, "STALL_S", 120.0)
    assert (await fetch(processor, "/healthz"))[0] == 200
    processor.stop()
    await run


def test_metrics_are_off_by_default_and_local_when_on(tmp_path: Path) -> None:
    config = settings(tmp_path)
    assert config.metrics_port is None and config.metrics_host == "127.0.0.1"


async def test_a_busy_metrics_port_is_a_clear_error(tmp_path: Path) -> None:
    from ckptlog.errors import ConfigError

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        _, run = start(tmp_path, FakeKafka(), metrics_port=busy.getsockname()[1])
        with pytest.raises(ConfigError, match="cannot serve metrics on 127.0.0.1"):
            await run


def test_every_exported_metric_is_documented_and_named_by_convention() -> None:
    documented = (DOCS / "observability.md").read_text()
    for name in EXPORTED:
        assert f"`{name}`" in documented, f"{name} is not in docs/observability.md"
        assert name.startswith("ckptlog_")
    for name in HOOKED:
        if name.endswith(("_seconds", "_records")):
            continue
        assert name.endswith("_total"), name
    for name, (kind, _, _) in STATE.items():
        assert name.endswith("_total") == (kind == "counter"), name
