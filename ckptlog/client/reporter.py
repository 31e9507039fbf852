"""`AsyncReporter` / `Reporter`: what a training job calls — Ray Train's `report`, as events.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, Unpack

from ckptlog.client import ids
from ckptlog.client.bodies import PathLike, ValidationArg, as_url, encode_checked, envelope, validation_body
from ckptlog.client.confirm import PROCESSOR_GROUP, Confirmer
from ckptlog.client.connect import EVENTS_TOPIC, STATE_TOPIC, Connection, resolve
from ckptlog.client.dead_letters import DLQ_TOPIC
from ckptlog.client.epoch import run_epoch
from ckptlog.client.errors import ClientClosed, ClientError, EventRejected, InvalidEvent
from ckptlog.client.event_warnings import CHECKPOINTS_TOPIC, EventWarning
from ckptlog.client.score_check import ScoreCheck
from ckptlog.events.paths import is_within
from ckptlog.events.retention_rules import rule_config
from ckptlog.events.rule_types import RuleKwargs
from ckptlog.events.rules import validation_without_checkpoint
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


class AsyncReporter:
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

    async def run_started(
        self,
        storage_path: PathLike,
        num_to_keep: int | None = None,
        checkpoint_score_attribute: str | None = None,
        checkpoint_score_order: Literal["max", "min"] = "max",
        validation: ValidationArg | None = None,
        *,
        event_id: str | None = None,
        confirm: bool | None = None,
        **rules: Unpack[RuleKwargs],
    ) -> SentEvent:
        """Declare the run's storage root and Ray's CheckpointConfig (send before the first checkpoint).
        Beyond Ray, `rules`: the retention rules' fields (ckptlog/events/retention_rules.py, contract
        §3), e.g. `keep_every_n_steps` preserves every checkpoint whose step (the metric
        `step_attribute`, default the report's 1-based number) is a multiple of N, and
        `keep_time_interval_s` one checkpoint per interval of report time; preserved checkpoints
        are never evicted and do not count against `num_to_keep`."""
        root = as_url(storage_path, "storage_path")
        config: dict[str, Any] = {
            "num_to_keep": num_to_keep,
            "checkpoint_score_attribute": checkpoint_score_attribute,
            "checkpoint_score_order": checkpoint_score_order,
            **rule_config(rules),  # only those set: the same ids as before the rules
        }
        data: dict[str, Any] = {"storage_path": root, "checkpoint_config": config}
        if validation is not None and validation is not False:
            spec = validation_body(validation)
            data["validation"] = {} if spec is True else spec
        async with self._order:

            def started() -> None:
                self._storage_path = root
                self._score.started(checkpoint_score_attribute)

            event_id = event_id or ids.run_started_id(self.run_id, data)
            return await self._send("run_started", data, event_id, confirm, started)

    async def report(
        self,
        metrics: Mapping[str, Any],
        checkpoint_path: PathLike | None = None,
        validation: ValidationArg = False,
        generation: int | None = None,
        *,
        index: int | None = None,
        event_id: str | None = None,
        confirm: bool | None = None,
    ) -> SentEvent:
        """Ray's `train.report(metrics, checkpoint)`; `validation` asks an evaluator to score the
        checkpoint first (True = the run's default spec, or {"fn_kwargs": ..., "timeout_s": ...})."""
        async with self._order:  # concurrent calls must not pick the same index, and keep their order
            return await self._report(metrics, checkpoint_path, validation, generation, index, event_id, confirm)

    async def _report(
        self,
        metrics: Mapping[str, Any],
        checkpoint_path: PathLike | None,
        validation: ValidationArg,
        generation: int | None,
        index: int | None,
        event_id: str | None,
        confirm: bool | None,
    ) -> SentEvent:
        if not isinstance(metrics, Mapping):  # the fold would dead-letter it: say so now, as ckptlog's error
            raise InvalidEvent(
                f"metrics of run {self.run_id!r} must be a mapping of name to value, got {metrics!r:.80}"
            )
        gen = generation if generation is not None else self.generation
        slot = gen or 0
        position = index if index is not None else self._next_index.get(slot, 0)
        data: dict[str, Any] = {"metrics": dict(metrics), "checkpoint": None, "validation": validation_body(validation)}
        if checkpoint_path is None and data["validation"] is not False:  # the fold would refuse it: say so now
            raise InvalidEvent(validation_without_checkpoint(self.run_id).message)
        if checkpoint_path is not None:
            data["checkpoint"] = {"path": self._checkpoint_url(checkpoint_path)}
            if data["validation"] is False:  # else its validation result may bring the score
                await self._check_score(data["metrics"])
        if gen is not None:
            data["generation"] = gen
        if event_id is None:
            content = self.report_ids == "content" and index is None
            event_id = (
                ids.report_content_id(self.run_id, data) if content else ids.report_id(self.run_id, gen, position)
            )

        def counted() -> None:
            self._next_index[slot] = max(self._next_index.get(slot, 0), position + 1)
            self.reports_sent += 1

        return await self._send("report", data, event_id, confirm, counted)

    async def worker_group_restart(
        self,
        num_workers: int,
        reason: str | None = None,
        *,
        generation: int | None = None,
        event_id: str | None = None,
        confirm: bool | None = None,
    ) -> SentEvent:
        """A new worker group starts: generation + 1 (or `generation`, e.g. a resumed job going on
        after the run's view), report index back to 0 (as the fold does); later reports carry the
        new generation so reports from the old workers are rejected."""
        async with self._order:
            new_generation = generation if generation is not None else (self.generation or 0) + 1
            data: dict[str, Any] = {"num_workers": num_workers, "reason": reason}
            if generation is not None:
                data["generation"] = generation

            def restarted() -> None:
                self.generation = new_generation
                self._next_index[new_generation] = 0

            event_id = event_id or ids.restart_id(self.run_id, new_generation)
            return await self._send("worker_group_restart", data, event_id, confirm, restarted)

    async def finish(
        self,
        keep: Literal["kept", "best"] | None = None,
        *,
        epoch: int | None = None,
        event_id: str | None = None,
        confirm: bool | None = None,
    ) -> SentEvent:
        """The run is over (contract §3 "Finished runs"): its last retention is applied (`keep`:
        `kept`, the default, keeps the kept set; `best` only the best besides the latest, pending
        and preserved ones), later events for it are refused (`run_finished`) and it leaves the
        processor's hot state once its deletions are settled; its final VIEW stays readable.
        `epoch`: the run's reopens so far, which its id names (default: this reporter's, else the VIEW's)."""
        async with self._order:
            data: dict[str, Any] = {} if keep is None else {"keep": keep}
            if event_id is None:
                event_id = ids.finished_id(self.run_id, await self._epoch(epoch, strict=False))
            return await self._send("run_finished", data, event_id, confirm, lambda: None)

    async def reopen(
        self, *, epoch: int | None = None, event_id: str | None = None, confirm: bool | None = None
    ) -> SentEvent:
        """A finished run goes on with its state as it finished (contract §3 "Reopened runs"); refused
        (`confirm=True`: `EventRejected`) when it has not finished, is unknown or expired, or kept no
        state. `epoch`: the reopen this is, which its id names (default: the VIEW's `reopened` + 1)."""
        async with self._order:
            start = epoch if epoch is not None else await self._epoch(None, strict=True) + 1
            event_id = event_id or ids.reopened_id(self.run_id, start)

            def reopened() -> None:
                self.epoch = start

            return await self._send("run_reopened", {}, event_id, confirm, reopened)

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

    async def forget(self, *, event_id: str | None = None, confirm: bool | None = None) -> SentEvent:
        """An operator drops the run (contract §3 "Forgotten runs"): its state and VIEW go, its
        checkpoints stay in storage; refused (`deletions_owed`) while deletions are not settled."""
        async with self._order:
            event_id = event_id or ids.forgotten_id(self.run_id)
            return await self._send("run_forgotten", {}, event_id, confirm, lambda: None)

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

    async def validation_result(
        self,
        checkpoint_path: PathLike,
        status: Literal["VALIDATED", "VALIDATION_FAILED", "VALIDATION_TIMEOUT"],
        metrics: Mapping[str, Any] | None = None,
        error: str | None = None,
        *,
        event_id: str | None = None,
        confirm: bool | None = None,
    ) -> SentEvent:
        """A validation result the caller obtained itself (e.g. Ray's own validation, forwarded by
        ckptlog.integrations.ray), rather than through ckptlog's Evaluator: merged into the
        checkpoint's metrics when VALIDATED, as the fold does for any result."""
        data: dict[str, Any] = {
            "checkpoint_path": as_url(checkpoint_path, "checkpoint_path"),
            "status": status,
            "metrics": dict(metrics or {}),
        }
        if error is not None:
            data["error"] = error
        async with self._order:
            event_id = event_id or ids.forwarded_result_id(self.run_id, data)
            return await self._send("validation_result", data, event_id, confirm, lambda: None)

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

    async def confirm(self, sent: SentEvent, timeout_s: float | None = None) -> tuple[EventWarning, ...]:
        """Wait until the processor committed `sent` (an event this reporter sent while confirming, i.e.
        with `confirm=True`) and return the warnings it caused; raise `EventRejected` if it was
        rejected, `NotConfirmed` at `timeout_s` (default: the reporter's `confirm_timeout_s`)."""
        if self._confirmer is None:
            raise ClientError("nothing to confirm: create the reporter with confirm=True (or pass confirm=True)")
        return await self._confirm(self._confirmer, sent, self.confirm_timeout_s if timeout_s is None else timeout_s)

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
