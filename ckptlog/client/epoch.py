"""A run's epoch (contract §3 "Reopened runs"): how many times it was reopened after a finish, as its
newest VIEW on the state topic says (`reopened`, absent: 0). The ids of a run's finish and reopen
name it (ckptlog.client.ids), so a finish after a reopen is not taken for the finish before it."""

from __future__ import annotations

import logging

from ckptlog.client.errors import ClientError
from ckptlog.errors import CkptlogError
from ckptlog.events.state import StateTable
from ckptlog.events.view import RunView
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.reader import TopicReader

log = logging.getLogger(__name__)


async def newest_view(conn: KafkaConnection, state_topic: str, run_id: str) -> RunView | None:
    """The run's newest VIEW head on `state_topic` (None: none). Reads only the run's partition, and
    decodes only the run's own records."""
    key, table = run_id.encode(), StateTable()
    async with TopicReader(conn, state_topic, key=key) as reader:
        async for batch in reader.batches():
            for r in batch:
                if r.key == key:
                    table.take(f"{r.topic}[{r.partition}]@{r.offset}", r.key, r.value, r.headers)
    head = table.heads.get(run_id)
    return head.view if head is not None else None


async def view_epoch(conn: KafkaConnection, state_topic: str, run_id: str) -> int:
    """The run's epoch as its newest VIEW says: right once the processor has folded its last reopen
    (a confirmed reopen has)."""
    view = await newest_view(conn, state_topic, run_id)
    return view.reopened or 0 if view is not None else 0


async def run_epoch(conn: KafkaConnection, state_topic: str, run_id: str, *, strict: bool) -> int:
    """`view_epoch`, for a sender about to name an event by it: a VIEW that cannot be read raises
    (`strict`: a reopen's id must not repeat an earlier reopen's), else counts as no reopen, 0, as
    every finish was named before reopens (the finish of a run never reopened keeps its id)."""
    try:
        return await view_epoch(conn, state_topic, run_id)
    except CkptlogError as exc:
        if strict:
            raise ClientError(
                f"run {run_id!r}: its VIEW on {state_topic} could not be read ({exc}), so the reopen's epoch is "
                "unknown; pass state_topic= (the processor's --state-topic) or epoch="
            ) from exc
        log.warning(
            "event=finish_epoch_unknown run=%r topic=%s error=%r: the finish is named as before any reopen",
            run_id,
            state_topic,
            exc,
        )
        return 0
