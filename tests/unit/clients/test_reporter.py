"""Reporter numbering and checks with a fake producer (no broker), and the CLI's flag parsing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ckptlog.cli.clients import UsageError, parse_metrics, validation_flag
from ckptlog.client import ids
from ckptlog.client.errors import ClientError, InvalidEvent
from ckptlog.client.reporter import AsyncReporter
from ckptlog.events.codec import decode_event
from ckptlog.kafka.clients_io import Delivery


class FakeProducer:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, topic: str, key: bytes, value: bytes) -> Delivery:
        assert not isinstance(decode_event(value, key), Exception)
        self.sent.append(json.loads(value))
        return Delivery(topic, 0, len(self.sent) - 1)

    async def stop(self) -> None:
        return None


def reporter(**kwargs: Any) -> tuple[AsyncReporter, FakeProducer]:
    rep, fake = AsyncReporter("run-1", **kwargs), FakeProducer()
    rep._producer = fake  # type: ignore[assignment]
    return rep, fake


async def test_report_ids_follow_the_sequence_and_restart_resets_it() -> None:
    rep, fake = reporter()
    await rep.run_started("/runs/a", num_to_keep=2)
    a = await rep.report({"loss": 1.0}, "/runs/a/c0")
    b = await rep.report({"loss": 0.5})
    restart = await rep.worker_group_restart(4, "preempted")
    c = await rep.report({"loss": 0.4}, "/runs/a/c1")
    assert [a.event_id, b.event_id] == [ids.report_id("run-1", None, 0), ids.report_id("run-1", None, 1)]
    assert restart.event_id == ids.restart_id("run-1", 1)
    assert c.event_id == ids.report_id("run-1", 1, 0)
    assert fake.sent[-1]["data"]["generation"] == 1 and "generation" not in fake.sent[1]["data"]
    assert rep.reports_sent == 3


async def test_finish_sends_run_finished_once_per_run() -> None:
    rep, fake = reporter()
    plain = await rep.finish()
    best = await rep.finish("best")
    assert plain.event_id == best.event_id == ids.finished_id("run-1") and plain.type == "ckptlog.run_finished.v1"
    assert [e["data"] for e in fake.sent] == [{}, {"keep": "best"}]
    with pytest.raises(InvalidEvent, match="invalid_data"):
        await rep.finish("everything")  # type: ignore[arg-type]


async def test_reopen_and_the_finish_after_it_are_named_by_the_runs_epoch() -> None:
    """contract §3 "Reopened runs": the n-th reopen, and the finish after it, have ids of their own."""
    rep, fake = reporter()
    with pytest.raises(ClientError, match="epoch="):
        await rep.reopen()  # no VIEW to read the epoch from: never a guessed id
    reopened = await rep.reopen(epoch=2)
    assert reopened.event_id == ids.reopened_id("run-1", 2) and reopened.type == "ckptlog.run_reopened.v1"
    finished = await rep.finish()  # this reporter reopened it: the finish of epoch 2
    assert finished.event_id == ids.finished_id("run-1", 2) != ids.finished_id("run-1")
    assert (await rep.finish(epoch=0)).event_id == ids.finished_id("run-1")
    assert [e["type"] for e in fake.sent] == ["ckptlog.run_reopened.v1", *["ckptlog.run_finished.v1"] * 2]
    assert fake.sent[0]["data"] == {}


async def test_a_retry_of_the_same_report_has_the_same_id() -> None:
    first, _ = reporter()
    second, _ = reporter()  # e.g. the job re-run from the top
    assert (await first.report({"x": 1})).event_id == (await second.report({"x": 1})).event_id


async def test_pinned_index_and_event_id() -> None:
    rep, _ = reporter(generation=2, first_index=7)
    assert (await rep.report({})).event_id == ids.report_id("run-1", 2, 7)
    assert (await rep.report({}, index=20)).event_id == ids.report_id("run-1", 2, 20)
    assert (await rep.report({})).event_id == ids.report_id("run-1", 2, 21)
    assert (await rep.report({}, event_id="mine")).event_id == "mine"


async def test_content_ids_for_one_shot_senders() -> None:
    rep, fake = reporter(report_ids="content")
    one = await rep.report({"loss": 1.0}, "/r/c1")
    again = await rep.report({"loss": 1.0}, "/r/c1")
    other = await rep.report({"loss": 0.9}, "/r/c2")
    assert one.event_id == again.event_id != other.event_id
    assert one.event_id == ids.report_content_id("run-1", fake.sent[0]["data"])


async def test_invalid_reports_fail_before_sending_and_do_not_advance() -> None:
    rep, fake = reporter()
    await rep.run_started("file:///runs/a")
    with pytest.raises(InvalidEvent, match="outside the run's storage_path"):
        await rep.report({}, "file:///elsewhere/c1")
    with pytest.raises(InvalidEvent, match="num_to_keep"):
        await rep.run_started("/runs/b", num_to_keep=0)
    with pytest.raises(InvalidEvent, match="generation"):
        await rep.report({}, generation=-1)
    assert len(fake.sent) == 1
    assert (await rep.report({})).event_id == ids.report_id("run-1", None, 0)


async def test_run_started_default_validation_spec() -> None:
    rep, fake = reporter()
    await rep.run_started("/runs/a", validation=True)
    await rep.run_started("/runs/a", validation={"fn_kwargs": {"split": "val"}, "timeout_s": 30})
    assert fake.sent[0]["data"]["validation"] == {}
    assert fake.sent[1]["data"]["validation"] == {"fn_kwargs": {"split": "val"}, "timeout_s": 30.0}


def test_parse_metrics() -> None:
    got = parse_metrics(["loss=0.25", "ok=true", "name=resnet", "bad=NaN", "n=3"], '{"x": {"y": 1}}')
    assert got["loss"] == 0.25 and got["ok"] is True and got["name"] == "resnet" and got["n"] == 3
    assert got["bad"] != got["bad"] and got["x"] == {"y": 1}
    with pytest.raises(UsageError, match="name=value"):
        parse_metrics(["loss"], None)
    with pytest.raises(UsageError, match="JSON object"):
        parse_metrics([], "[1]")


def test_validation_flag() -> None:
    assert validation_flag(False, None, None) is False
    assert validation_flag(True, None, None) is True
    assert validation_flag(False, '{"k": 1}', None) == {"fn_kwargs": {"k": 1}, "timeout_s": None}
    assert validation_flag(False, None, 5.0) == {"fn_kwargs": {}, "timeout_s": 5.0}


async def test_concurrent_reports_get_distinct_indices_in_order() -> None:
    import asyncio

    rep, fake = reporter()
    sent = await asyncio.gather(*(rep.report({"i": i}) for i in range(5)))
    assert [s.event_id for s in sent] == [ids.report_id("run-1", None, i) for i in range(5)]
    assert [e["data"]["metrics"]["i"] for e in fake.sent] == list(range(5))
