"""`AsyncReporter` / `Reporter`: what a training job calls — Ray Train's `report`, as events.

The methods that send an event (`run_started`, `report`, `finish`, …) are written once in
ckptlog/client/senders.py, a base of both reporters; this module holds the async reporter's
connection, the send itself and the confirmation.

Every call validates its event with the processor's own decoder (ckptlog.client.bodies), sends it
with key = run id through an idempotent producer, and returns once the broker acknowledged
it. Ids are deterministic (ckptlog.client.ids): a report is named by (run, generation, index
within the generation), so re-running a call after an error — or re-running a job from
the top — sends the same ids and the processor ignores the repeats.

A job that *resumes* (continues reporting after a crash without a worker-group restart)
must continue the numbering: pass `generation=` and `first_index=` (e.g. the run view's
`generation` / `index_in_generation`, see `AsyncReader.view`).

By default a call returns once the broker acknowledged the event: whether the processor applies
or rejects it is known only later (its dead-letter topic says so). With `confirm=True` (for the
reporter, or per call) a call returns only once the processor has committed the event, and raises
`EventRejected` with the reason code and message when it was rejected (ckptlog.client.confirm). A report
whose metrics lack the run's score attribute warns before it is sent (ckptlog.client.score_check).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from ckptlog.client.bodies import PathLike, as_url, encode_checked, envelope
from ckptlog.client.confirm import PROCESSOR_GROUP, Confirmer
from ckptlog.client.connect import EVENTS_TOPIC, STATE_TOPIC, Connection, resolve
from ckptlog.client.dead_letters import DLQ_TOPIC
from ckptlog.client.epoch import run_epoch
from ckptlog.client.errors import ClientClosed, ClientError, EventRejected, InvalidEvent
from ckptlog.client.event_warnings import CHECKPOINTS_TOPIC, EventWarning
from ckptlog.client.score_check import ScoreCheck
from ckptlog.client.senders import Senders
from ckptlog.events.paths import is_within
from ckptlog.kafka.clients_io import EventProducer
from ckptlog.kafka.connection import KafkaConnection

SOURCE = "ckptlog/reporter"
ReportIds = Literal["sequence", "content"]
"""How `report` names events without index=/event_id=: by the reporter's counter, or (one-shot
senders such as the CLI, which have no counter) by a hash of the report's data."""


@dataclass(frozen=True, slots=True)
class SentEvent:
    """An acknowledged event: its id and where it landed."""

    event_id: str
    type: str
    run_id: str
    topic: str
    partition: int
    offset: int
    warnings: tuple[EventWarning, ...] = ()
    """With confirm=True: the warnings the processor wrote for the event (it was applied, but e.g. a
    validation result named an unknown checkpoint, or the score is missing or not a number)."""


class AsyncReporter(Senders):
    """Reports of one run. `async with AsyncReporter("run-1") as r: await r.report({...})`.

    `confirm=True`: every call waits until the processor (consumer group `processor_group`) has
    committed its event, up to `confirm_timeout_s`, and raises `EventRejected` when the processor
    dead-lettered it (on `dlq_topic`); each call's `confirm=` overrides it. `check_score`: warn
    (`ScoreMissingWarning`) about a report lacking the run's score attribute, which it reads once
    from the run's VIEW on `state_topic` unless this reporter sent the run's run_started."""

    def __init__(
        self,
        run_id: str,
        *,
        bootstrap_servers: str | None = None,
        topic: str = EVENTS_TOPIC,
        generation: int | None = None,
        first_index: int = 0,
        source: str = SOURCE,
        connection: Connection | None = None,
        report_ids: ReportIds = "sequence",
        confirm: bool = False,
        confirm_timeout_s: float | None = 60.0,
        processor_group: str = PROCESSOR_GROUP,
        dlq_topic: str = DLQ_TOPIC,
        checkpoints_topic: str = CHECKPOINTS_TOPIC,
        state_topic: str = STATE_TOPIC,
        check_score: bool = True,
    ) -> None:
        self.run_id, self.topic, self.source, self.report_ids = run_id, topic, source, report_ids
        self._score = ScoreCheck(run_id, state_topic, check_score)
        self._state_topic = state_topic
        self.epoch: int | None = None  # the run's reopens as this reporter knows them (its own reopen, or given)
        self._checkpoints_topic = checkpoints_topic
        self.confirm_by_default, self.confirm_timeout_s = confirm, confirm_timeout_s
        self._processor_group, self._dlq_topic = processor_group, dlq_topic
        self._confirmer: Confirmer | None = None
        self.generation = generation
        self.reports_sent = 0
        self._next_index: dict[int, int] = {generation or 0: first_index}
        self._storage_path: str | None = None
        self._bootstrap, self._connection = bootstrap_servers, connection
        self._producer: EventProducer | None = None
        self._conn: KafkaConnection | None = None
        self._lock = asyncio.Lock()  # start/close
        self._order = asyncio.Lock()  # one event at a time: indices and order on the partition
        self._closed = False

    async def start(self) -> None:
        """Connect (also done by the first call); idempotent."""
        async with self._lock:
            if self._closed:
                raise ClientClosed(f"reporter of run {self.run_id!r} is closed; create a new one")
            if self._producer is None:
                conn = await resolve(self._bootstrap, "ckptlog-reporter", self._connection)
                producer = EventProducer(conn)
                await producer.start()
                try:
                    if not await producer.has_topic(self.topic):
                        raise ClientError(
                            f"topic {self.topic} does not exist on {conn.bootstrap_servers}; start "
                            "the processor once (`ckptlog run` creates its topics) or create it"
                        )
                except BaseException:
                    await producer.stop()
                    raise
                self._producer, self._conn = producer, conn
            if self.confirm_by_default:
                await self._start_confirmer()

    async def _start_confirmer(self) -> Confirmer:
        if self._confirmer is None:
            assert self._conn is not None
            confirmer = Confirmer(
                self._conn,
                self.run_id,
                group_id=self._processor_group,
                dlq_topic=self._dlq_topic,
                checkpoints_topic=self._checkpoints_topic,
            )
            await confirmer.start()
            self._confirmer = confirmer
        return self._confirmer

    async def close(self) -> None:
        async with self._lock:
            self._closed = True
            if self._confirmer is not None:
                await self._confirmer.close()
                self._confirmer = None
            if self._producer is not None:
                await self._producer.stop()
                self._producer = None

    async def __aenter__(self) -> AsyncReporter:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- what the reporter knows of its run, moved on as the events of senders.py are sent ----------

    def _started(self, root: str, score_attribute: str | None) -> None:
        """Its run_started was sent: later checkpoints are checked against the root, reports against
        the score attribute."""
        self._storage_path = root
        self._score.started(score_attribute)

    def _restarted(self, generation: int) -> None:
        """Its worker_group_restart was sent: reports carry the generation, numbered from 0."""
        self.generation = generation
        self._next_index[generation] = 0

    def _reopened(self, epoch: int) -> None:
        """Its run_reopened was sent: the run's epoch, which a later finish's id names."""
        self.epoch = epoch

    async def _epoch(self, given: int | None, *, strict: bool) -> int:
        """The run's epoch: `given`, this reporter's, else its VIEW's (ckptlog.client.epoch.run_epoch)."""
        if given is not None or self.epoch is not None:
            return given if given is not None else self.epoch or 0
        if self._conn is None:
            await self.start()
        if self._conn is None:  # a producer without a connection (a test double): no VIEW to read
            if strict:
                raise ClientError(f"run {self.run_id!r}: no connection to read its VIEW from; pass epoch=")
            return 0
        return await run_epoch(self._conn, self._state_topic, self.run_id, strict=strict)

    async def _check_score(self, metrics: dict[str, Any]) -> None:
        if not self._score.known and self._conn is None:
            await self.start()  # connects: the check may read the run's VIEW
        await self._score.check(self._conn, metrics)

    def _checkpoint_url(self, checkpoint_path: PathLike) -> str:
        url = as_url(checkpoint_path, "checkpoint_path")
        root = self._storage_path
        if root is not None and not is_within(root, url):
            raise InvalidEvent(
                f"checkpoint {url!r} of run {self.run_id!r} is outside the run's storage_path "
                f"{root!r}; save checkpoints under it (the processor only deletes inside it)"
            )
        return url

    async def _send(
        self, kind: str, data: dict[str, Any], event_id: str, confirm: bool | None, sent_hook: Callable[[], None]
    ) -> SentEvent:
        """Check, send, and (confirming) wait for the processor. `sent_hook` moves the reporter on (its
        index, generation, root) once the event is sent — unless the processor rejected it: a rejected
        event counts for nothing in the run (and its id is free for a corrected resend)."""
        raw = encode_checked(envelope(kind, self.run_id, data, event_id, self.source))
        if self._producer is None:
            await self.start()
        producer = self._producer
        if producer is None:
            raise ClientClosed(f"reporter of run {self.run_id!r} is closed; create a new one")
        confirming = self.confirm_by_default if confirm is None else confirm
        confirmer = await self._start_confirmer() if confirming else None
        where = await producer.send(self.topic, self.run_id.encode(), raw)
        sent = SentEvent(event_id, f"ckptlog.{kind}.v1", self.run_id, where.topic, where.partition, where.offset)
        if self._confirmer is not None:
            self._confirmer.sent(sent.offset)  # sent while following the DLQ: confirmable later too
        if confirmer is not None:
            try:
                sent = replace(sent, warnings=await self._confirm(confirmer, sent, self.confirm_timeout_s))
            except EventRejected:
                raise
            except BaseException:
                sent_hook()  # not known to be rejected: it may still be applied
                raise
        sent_hook()
        return sent

    async def _confirm(
        self, confirmer: Confirmer, sent: SentEvent, timeout_s: float | None
    ) -> tuple[EventWarning, ...]:
        what = f"{sent.type} {sent.event_id} of run {sent.run_id!r}"
        return await confirmer.confirm(what, sent.topic, sent.partition, sent.offset, timeout_s)


def __getattr__(name: str) -> Any:
    """`ckptlog.client.reporter.Reporter` still resolves: the sync Reporter lives in ckptlog.client.sync_clients."""
    if name == "Reporter":
        from ckptlog.client.sync_clients import Reporter

        return Reporter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
