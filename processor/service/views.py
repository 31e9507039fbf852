"""Read run VIEWs back from the compacted state topic (what `ckptlog inspect` and the tests do).

A run keeping many checkpoints is published as a head and page records (processor/service/
pages.py); the views returned here are assembled (events.view.assemble): the shape `ckptlog
fold` prints, whatever records carried them. Of a run's heads the newest by its input-offset
header wins (events.state); the pages are their latest values. Records that cannot be read —
any bytes may sit on the topic — are returned as problems, never raised.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from events.codec import DEFAULT_LIMITS, DecodeLimits
from events.state import Problem, StateTable, state_limits
from events.view import parse_page_key
from processor.core.view import View
from processor.kafka.connection import KafkaConnection
from processor.kafka.reader import TopicReader


@dataclass(slots=True)
class StateRead:
    """What the state topic holds: run id -> VIEW, and the records (or runs) that cannot be read."""

    views: dict[str, View] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    written_ms: dict[str, int] = field(default_factory=dict)  # when each run's newest head record was written


async def read_state_topic(
    conn: KafkaConnection, state_topic: str, runs: Iterable[str] = (), limits: DecodeLimits = DEFAULT_LIMITS
) -> StateRead:
    """Every run's latest VIEW, from the beginning of the state topic to its end offsets (`runs`
    filters: the other runs' records are not decoded), with what cannot be read."""
    table = StateTable(state_limits(limits))
    stamps: dict[bytes, int] = {}
    wanted = set(runs)
    async with TopicReader(conn, state_topic) as reader:
        async for batch in reader.batches():
            for r in batch:
                if wanted and r.key is not None and run_of(r.key) not in wanted:
                    continue  # `inspect RUN` on a topic of 10,000 runs decodes one run's records
                table.take(f"{r.topic}[{r.partition}]@{r.offset}", r.key, r.value, r.headers)
                if r.key is not None and r.timestamp is not None:
                    stamps[r.key] = r.timestamp
            table.fresh.clear()  # all of them are returned in `problems`
    result = StateRead()
    for run_id in sorted(table.heads):
        if wanted and run_id not in wanted:
            continue
        found = table.view(run_id)
        if isinstance(found, Problem):
            result.problems.append(found)
        elif found is not None:
            result.views[run_id] = found[0]
            if (stamp := stamps.get(run_id.encode())) is not None:
                result.written_ms[run_id] = stamp
    result.problems.extend(p for _, p in sorted(table.problems.items()) if not wanted or p.run_id in wanted)
    return result


def run_of(key: bytes) -> str:
    """The run a state record's key belongs to, as its `Problem.run_id` would name it: a page key's
    run id, else the key (text; bytes that are not UTF-8 escaped)."""
    name = key.decode("utf-8", "backslashreplace")
    page = parse_page_key(name)
    return page[0] if page is not None else name


async def read_views(conn: KafkaConnection, state_topic: str, runs: Iterable[str] = ()) -> dict[str, View]:
    """run id -> latest VIEW (see `read_state_topic`; what cannot be read is left out)."""
    return (await read_state_topic(conn, state_topic, runs)).views
