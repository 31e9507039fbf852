"""Read run VIEWs back from the compacted state topic (what `ckptlog inspect` and the tests do).

A run keeping many checkpoints is published as a head and page records (processor/service/
pages.py); the views returned here are assembled (events.view.assemble): the shape `ckptlog
fold` prints, whatever records carried them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from events.view import assemble, parse_page_key
from processor.core.view import View
from processor.kafka.connection import KafkaConnection
from processor.kafka.reader import read_latest


async def read_views(conn: KafkaConnection, state_topic: str, runs: Iterable[str] = ()) -> dict[str, View]:
    """run id -> latest VIEW, from the beginning of the state topic to its end offsets; `runs` filters."""
    wanted = set(runs)
    heads: dict[str, Any] = {}
    parts: dict[str, dict[tuple[int, int], Any]] = {}
    for key, value in (await read_latest(conn, state_topic)).items():
        name = key.decode("utf-8", "replace")
        page = parse_page_key(name)
        if page is not None:
            parts.setdefault(page[0], {})[page[1:]] = json.loads(value)
        elif not wanted or name in wanted:
            heads[name] = json.loads(value)
    return {run_id: assemble(head, parts.get(run_id, {})) for run_id, head in sorted(heads.items())}
