"""Read run VIEWs back from the compacted state topic (what `ckptlog inspect` and the tests do).

A run keeping many checkpoints is published as a head and page records (ckptlog/processor/service/
pages.py); the views returned here are assembled (ckptlog.events.view.assemble): the shape `ckptlog
fold` prints, whatever records carried them. Of a run's heads the newest by its input-offset
header wins (ckptlog.events.state); the pages are their latest values. Records that cannot be read —
any bytes may sit on the topic — are returned as problems, never raised.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ckptlog.events.codec import DEFAULT_LIMITS, DecodeLimits
from ckptlog.events.state import Problem, StateTable, state_limits
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.reader import TopicReader
from ckptlog.processor.core.view import View
from ckptlog.processor.service.state_scan import StateScan, run_of

__all__ = ["StateRead", "read_state_topic", "read_views", "run_of"]


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
    filters: the other runs' records are not decoded, nor the heads a later one replaces:
    ckptlog/processor/service/state_scan.py), with what cannot be read."""
    table = StateTable(state_limits(limits))
    stamps: dict[bytes, int] = {}
    wanted = set(runs)
    scan = StateScan(table)
    await _read(conn, state_topic, wanted, scan, stamps)
    if scan.unsure:  # an unreadable head: what it made irrelevant may matter after all, read it all again
        scan.forget_unsure()
        await _read(conn, state_topic, scan.unsure, StateScan(table, direct=set(scan.unsure)), {})
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


async def _read(conn: KafkaConnection, topic: str, wanted: set[str], scan: StateScan, stamps: dict[bytes, int]) -> None:
    """Every record of the topic up to its end offsets into `scan` (of the `wanted` runs only, if any)."""
    async with TopicReader(conn, topic) as reader:
        async for batch in reader.batches():
            for r in batch:
                if wanted and r.key is not None and run_of(r.key) not in wanted:
                    continue  # `inspect RUN` on a topic of 10,000 runs decodes one run's records
                scan.add(r)
                if r.key is not None and r.timestamp is not None:
                    stamps[r.key] = r.timestamp
            scan.table.fresh.clear()  # all of them are returned in `problems`
    scan.finish()
    scan.table.fresh.clear()


async def read_views(conn: KafkaConnection, state_topic: str, runs: Iterable[str] = ()) -> dict[str, View]:
    """run id -> latest VIEW (see `read_state_topic`; what cannot be read is left out)."""
    return (await read_state_topic(conn, state_topic, runs)).views
