"""Issue 20: a fresh `AsyncReader` with a short timeout returned [] for a run whose VIEW was already on the
state topic: `wait_for` started its clock before the tail had read what the topic held. Now a wait
first catches up with the topic as it was at the call, then waits what is left of its timeout."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ckptlog.client import reader as reader_module
from ckptlog.client.reader import AsyncReader
from ckptlog.kafka.reader import Record
from tests.unit.clients.test_views import view


class SlowTail:
    """A state topic holding one VIEW, whose first fetch takes as long as a real broker's first
    fetch may (a metadata round trip, a fetch, the records)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.records = [Record("state", 0, 0, b"r", json.dumps(view(3, paths=("/a", "/b"))).encode(), ())]
        self.position = 0

    async def start(self) -> None:
        return None

    async def fetch(self) -> list[Record]:
        await asyncio.sleep(0.3 if self.position == 0 else 0.02)
        out, self.position = self.records[self.position :], len(self.records)
        return out

    async def positions(self) -> dict[int, int]:
        return {0: self.position}

    async def end_offsets(self) -> dict[int, int]:
        return {0: len(self.records)}

    async def stop(self) -> None:
        return None


@pytest.fixture
def slow_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    async def resolve(*args: Any) -> object:
        return object()

    monkeypatch.setattr(reader_module, "TopicTail", SlowTail)
    monkeypatch.setattr(reader_module, "resolve", resolve)


@pytest.mark.usefixtures("slow_topic")
async def test_a_fresh_reader_with_a_short_timeout_finds_the_view_already_on_the_topic() -> None:
    async with AsyncReader(bootstrap_servers="unused:9092") as reader:
        kept = await reader.get_all_reported_checkpoints("r", 3, "committed", timeout_s=0.01)
    assert [c.path for c in kept] == ["/a", "/b"]


@pytest.mark.usefixtures("slow_topic")
async def test_the_timeout_counts_from_the_call_and_waits_only_for_what_is_not_there() -> None:
    async with AsyncReader(bootstrap_servers="unused:9092") as reader:
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await reader.wait_for("r", 4, "committed", timeout_s=0.5)  # not reached: the topic has 3
        elapsed = loop.time() - started
    assert not result.reached and result.view is not None and result.view.committed == 3
    assert 0.45 <= elapsed < 0.75  # the catch-up (0.3 s) lies inside the timeout, not on top of it
