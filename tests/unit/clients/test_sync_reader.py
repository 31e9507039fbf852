"""`Reader` (issue 17 item 6): the AsyncReader for synchronous training scripts, and every error
docs/clients.md names is importable from `ckptlog`."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import ckptlog
from ckptlog import Reader
from ckptlog.client.views import RunView

DOCS = Path(__file__).resolve().parents[3] / "docs" / "clients.md"


def view(committed: int) -> RunView:
    return RunView(
        checkpoints=[],
        latest=None,
        best=None,
        committed=committed,
        validated=committed,
        generation=0,
        index_in_generation=committed,
    )


class FakeReader:
    """The async AsyncReader's surface, in memory."""

    def __init__(self) -> None:
        self.closed = False

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        self.closed = True

    async def view(self, run_id: str) -> RunView | None:
        return view(3) if run_id == "r" else None

    async def get_all_reported_checkpoints(self, run_id: str, report_index: int, *args: Any, **kw: Any) -> list[Any]:
        await asyncio.sleep(0)
        return [report_index]

    async def watch(self, run_id: str) -> AsyncIterator[RunView]:
        for committed in (1, 2):
            yield view(committed)
        await asyncio.Event().wait()  # no further change


def sync_reader() -> tuple[Reader, FakeReader]:
    reader, fake = Reader(bootstrap_servers="unused:9092"), FakeReader()
    reader._async = fake  # type: ignore[assignment]
    return reader, fake


def test_sync_reader_calls_from_plain_code() -> None:
    reader, fake = sync_reader()
    with reader:
        assert reader.view("r") == view(3) and reader.view("other") is None
        assert reader.get_all_reported_checkpoints("r", 7, timeout_s=1) == [7]  # type: ignore[comparison-overlap]
        assert [v.committed for v in reader.watch("r", timeout_s=0.2)] == [1, 2]
    assert fake.closed


def test_every_error_the_client_docs_name_is_importable_from_ckptlog() -> None:
    """docs/clients.md listed CkptlogError and KafkaIOError, which `ckptlog` did not export."""
    text = DOCS.read_text()
    paragraph = text[text.index("All errors raised on purpose") :].split("\n\n")[0]
    named = set(re.findall(r"`([A-Z][A-Za-z]+)`", paragraph))
    assert {"CkptlogError", "KafkaIOError", "ConfigError", "EventRejected"} <= named
    for name in named:
        exported = getattr(ckptlog, name, None)
        assert isinstance(exported, type) and issubclass(exported, Exception), name
        assert issubclass(exported, ckptlog.CkptlogError), name
