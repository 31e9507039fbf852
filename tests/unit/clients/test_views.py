"""The AsyncReader's waiting rules without Kafka: RunView watermarks, ViewTable waits and feeds,
and the evaluator's commit point (ckptlog.client.offsets)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ckptlog.client.errors import ClientError
from ckptlog.client.offsets import PartitionProgress
from ckptlog.client.view_table import ViewTable
from ckptlog.client.views import RunView, check_consistency
from ckptlog.kafka.reader import Record


def view(committed: int, validated: int | None = None, paths: tuple[str, ...] = ()) -> dict[str, Any]:
    ckpts = [{"path": p, "metrics": {"i": i}, "status": "COMMITTED", "report_index": i} for i, p in enumerate(paths)]
    return {
        "checkpoints": ckpts,
        "latest": paths[-1] if paths else None,
        "best": paths[-1] if paths else None,
        "committed": committed,
        "validated": committed if validated is None else validated,
        "generation": 0,
        "index_in_generation": committed,
    }


def record(run: str, body: dict[str, Any] | None, offset: int = 0) -> Record:
    value = json.dumps(body).encode() if body is not None else None
    return Record("state", 0, offset, run.encode(), value, ())


@pytest.mark.parametrize(
    ("consistency", "index", "reached"),
    [
        ("committed", 5, True),
        ("committed", 6, False),
        ("validated", 3, True),
        ("validated", 4, False),
        ("committed", 0, True),
    ],
)
def test_reached_uses_the_matching_watermark(consistency: Any, index: int, reached: bool) -> None:
    assert RunView.model_validate(view(5, 3)).reached(index, consistency) is reached


def test_newer_than_refuses_watermarks_going_back() -> None:
    new, old = RunView.model_validate(view(5, 5)), RunView.model_validate(view(4, 4))
    assert new.newer_than(None) and new.newer_than(old) and not old.newer_than(new)
    assert not RunView.model_validate(view(5, 2)).newer_than(new)


def test_check_consistency() -> None:
    assert check_consistency("validated") == "validated"
    with pytest.raises(ClientError, match="'committed'"):
        check_consistency("COMMITTED_ONLY")


async def test_wait_for_returns_once_the_watermark_is_reached() -> None:
    table = ViewTable()
    await table.apply([record("r", view(1, paths=("/a",)))])
    waiter = asyncio.create_task(table.wait_for("r", 3, "committed", timeout_s=5))
    await asyncio.sleep(0.05)
    await table.apply([record("r", view(2, paths=("/a", "/b")))])
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await table.apply([record("other", view(9)), record("r", view(3, paths=("/a", "/b", "/c")))])
    result = await asyncio.wait_for(waiter, 1)
    assert result.reached and [c.path for c in result.checkpoints] == ["/a", "/b", "/c"]


async def test_wait_for_times_out_with_what_is_known() -> None:
    table = ViewTable()
    await table.apply([record("r", view(2, 1, paths=("/a",)))])
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await table.wait_for("r", 2, "validated", timeout_s=0.2)
    assert not result.reached and [c.path for c in result.checkpoints] == ["/a"]
    assert 0.15 < loop.time() - started < 1.0
    unknown = await table.wait_for("nobody", 1, "committed", timeout_s=0.05)
    assert unknown.view is None and unknown.checkpoints == []


async def test_wait_for_rejects_a_negative_index() -> None:
    with pytest.raises(ClientError, match="report_index"):
        await ViewTable().wait_for("r", -1)


async def test_a_replayed_older_view_is_ignored() -> None:
    table = ViewTable()
    await table.apply([record("r", view(3, paths=("/a", "/b"))), record("r", view(2, paths=("/a",)))])
    assert table.views["r"].committed == 3


async def test_bad_views_and_keyless_records_are_skipped() -> None:
    table = ViewTable()
    bad = Record("state", 0, 1, b"r", b"{not json", ())
    await table.apply([bad, Record("state", 0, 2, None, b"{}", ()), record("r", view(1))])
    assert list(table.views) == ["r"]


async def test_changes_yields_current_then_newer_and_skips_tombstones() -> None:
    table = ViewTable()
    await table.apply([record("r", view(1))])
    seen: list[int] = []

    async def consume() -> None:
        async for v in table.changes("r"):
            seen.append(v.committed)
            if v.committed == 3:
                return

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.02)
    await table.apply([record("r", None)])  # tombstone: nothing to yield
    await asyncio.sleep(0.02)
    await table.apply([record("r", view(2))])
    await asyncio.sleep(0.02)
    await table.apply([record("r", view(3))])
    await asyncio.wait_for(task, 1)
    assert seen == [1, 2, 3]


async def test_a_failed_feed_wakes_every_waiter_with_an_error() -> None:
    table = ViewTable()
    waiter = asyncio.create_task(table.wait_for("r", 1, timeout_s=5))
    await asyncio.sleep(0.02)
    await table.fail(RuntimeError("broker gone"))
    with pytest.raises(ClientError, match="broker gone"):
        await asyncio.wait_for(waiter, 1)


def test_commit_point_is_the_lowest_unfinished_request() -> None:
    progress = PartitionProgress()
    assert progress.committable() is None
    for offset in (10, 11, 12):
        progress.dispatched(offset)
    assert progress.committable() == 10
    progress.finished(11)
    progress.finished(12)
    assert progress.committable() == 10  # 10 still running: committing past it could lose it
    progress.committed = 10
    assert progress.committable() is None
    progress.finished(10)
    assert progress.committable() == 13 and progress.unfinished == 0


def test_the_clients_run_view_is_the_contracts_model() -> None:
    import ckptlog.events.view

    assert RunView is ckptlog.events.view.RunView
    assert "evicted" not in RunView.model_validate({**view(1), "evicted": ["/x"]}).model_dump()
