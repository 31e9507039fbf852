"""Read run VIEWs back from the compacted state topic (what `ckptlog inspect` and readers do)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from processor.core.view import View
from processor.kafka.connection import KafkaConnection
from processor.kafka.reader import read_latest


async def read_views(conn: KafkaConnection, state_topic: str, runs: Iterable[str] = ()) -> dict[str, View]:
    """run id -> latest VIEW, from the beginning of the state topic to its end offsets; `runs` filters."""
    wanted = set(runs)
    table = await read_latest(conn, state_topic)
    views: dict[str, View] = {}
    for key, value in table.items():
        run_id = key.decode("utf-8", "replace")
        if not wanted or run_id in wanted:
            views[run_id] = json.loads(value)
    return dict(sorted(views.items()))
