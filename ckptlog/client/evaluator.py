"""`Evaluator`: the worker behind `validation=...` — Ray Train's validation step, as a consumer group.

It consumes `validation_requested` events from the validations topic, runs the user's
`fn(checkpoint_path, **fn_kwargs) -> dict` under the request's `timeout_s` (or the default),
and produces a `validation_result` event to the input topic: VALIDATED with the returned
metrics, VALIDATION_FAILED with the error text, VALIDATION_TIMEOUT. Every outcome of `fn`
ends as a result and a log line (ckptlog.client.invoke, ckptlog.client.results); only stopping the
evaluator leaves a request without one, uncommitted.

At least once: a request's offset is committed only after its result was acknowledged, and
never past the lowest unfinished request of its partition (ckptlog.client.offsets). An evaluator
that dies mid-task leaves the request uncommitted; the group hands it to another member,
which redoes it. The result id is derived from the request id (ckptlog.client.ids), so the redo's
result is deduplicated by the processor if the first one did get through. A partition a
rebalance hands back to this member is fetched again from its committed offset: the requests
this process is running or has finished meanwhile are not started again (StartedRequests).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ckptlog.client.connect import Connection, Topics, resolve
from ckptlog.client.errors import FunctionLoadError
from ckptlog.client.invoke import Outcome, ValidationFn, cancelled_here, describe, invoke
from ckptlog.client.offsets import PartitionProgress, StartedRequests
from ckptlog.client.results import SOURCE, bare_result, encode_result, parse_request, result_event
from ckptlog.errors import ConfigError
from ckptlog.events.outputs import OutputEnvelope, ValidationRequested
from ckptlog.kafka.clients_io import EventProducer
from ckptlog.kafka.consumer import GroupConsumer
from ckptlog.kafka.errors import KafkaIOError
from ckptlog.kafka.limits import session_timeout_problem
from ckptlog.kafka.records import InputRecord, PartitionId

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_GROUP", "SOURCE", "AsyncEvaluator", "load_function", "parse_request", "result_event"]

DEFAULT_GROUP = "ckptlog-evaluators"
TOPIC_POLL_S = 1.0
RESEND_FIRST_S, RESEND_MAX_S = 0.5, 10.0
ResultHook = Callable[[str, ValidationRequested, Outcome], None]


def load_function(spec: str) -> ValidationFn:
    """`package.module:function` -> the callable."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise FunctionLoadError(f"--fn {spec!r} must look like package.module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise FunctionLoadError(f"--fn {spec!r}: cannot import {module_name!r} ({exc}); check PYTHONPATH") from None
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
    if not callable(target):
        raise FunctionLoadError(f"--fn {spec!r}: {module_name} has no callable {attr!r}")
    return target  # type: ignore[no-any-return]


class _Rebalance:
    """The consumer group's rebalance callbacks (GroupConsumer's AssignmentListener), kept off the
    evaluator's public surface: they are Kafka's business, not the user's."""

    def __init__(self, evaluator: AsyncEvaluator) -> None:
        self._evaluator = evaluator

    async def partitions_revoked(self, partitions: list[PartitionId]) -> None:
        await self._evaluator._revoked(partitions)

    async def partitions_assigned(self, partitions: list[PartitionId]) -> None:
        await self._evaluator._assigned(partitions)


class AsyncEvaluator:
    """`await AsyncEvaluator(fn, concurrency=4).run()` until `stop()`; `Evaluator` is its blocking twin."""

    def __init__(
        self,
        fn: ValidationFn,
        *,
        bootstrap_servers: str | None = None,
        topics: Topics | None = None,
        group_id: str = DEFAULT_GROUP,
        concurrency: int = 4,
        default_timeout_s: float | None = None,
        session_timeout_ms: int = 10_000,
        group_instance_id: str | None = None,
        stop_grace_s: float = 10.0,
        connection: Connection | None = None,
        on_result: ResultHook | None = None,
    ) -> None:
        if concurrency < 1:
            raise FunctionLoadError(f"concurrency must be >= 1 (got {concurrency})")
        problem = session_timeout_problem(session_timeout_ms)
        if problem is not None:
            raise ConfigError(problem)
        self.fn, self.topics, self.group_id = fn, topics or Topics(), group_id
        self.concurrency, self.default_timeout_s = concurrency, default_timeout_s
        self.results: Counter[str] = Counter()
        self._session_timeout_ms, self._instance, self._grace = session_timeout_ms, group_instance_id, stop_grace_s
        self._bootstrap, self._connection, self._on_result = bootstrap_servers, connection, on_result
        self._progress: dict[PartitionId, PartitionProgress] = {}
        self._started, self._rebalancing = StartedRequests(), False
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(concurrency)
        self._stopping = asyncio.Event()
        self.ready = asyncio.Event()
        self._consumer: GroupConsumer | None = None
        self._producer: EventProducer | None = None

    def stop(self) -> None:
        """Finish the requests in flight (up to `stop_grace_s`), commit, leave the group."""
        self._stopping.set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def run(self) -> None:
        """Consume, validate and report until `stop()`."""
        conn = await resolve(self._bootstrap, "ckptlog-evaluator", self._connection)
        producer = EventProducer(conn)
        await producer.start()
        self._producer = producer
        try:
            if not await self._wait_for_topic(producer):
                return
            self._consumer = GroupConsumer(
                conn,
                self.group_id,
                self.topics.validations,
                _Rebalance(self),
                max_records=self.concurrency,
                session_timeout_ms=self._session_timeout_ms,
                group_instance_id=self._instance,
            )
            await self._consumer.start()
            await self._loop(self._consumer)
        finally:
            await self._shutdown()

    async def _wait_for_topic(self, producer: EventProducer) -> bool:
        """Subscribe only once the validations topic exists (False: stopped first). A consumer
        subscribed to a missing topic sees it only at its next metadata refresh, ~5 minutes later."""
        topic, waited = self.topics.validations, False
        while not await producer.has_topic(topic):
            if not waited:
                log.warning(
                    "event=waiting_for_topic topic=%s: it does not exist yet; the processor creates it when it "
                    "starts (`ckptlog run`). Checking every %.0f s",
                    topic,
                    TOPIC_POLL_S,
                )
                waited = True
            try:
                await asyncio.wait_for(self._stopping.wait(), TOPIC_POLL_S)
                return False
            except TimeoutError:
                pass
        if waited:
            log.info("event=topic_found topic=%s", topic)
        return True

    async def _loop(self, consumer: GroupConsumer) -> None:
        while not self._stopping.is_set():
            full = len(self._tasks) >= self.concurrency
            pids = sorted(consumer.assignment())
            (consumer.pause if full else consumer.resume)(pids)
            polled = await consumer.poll(100 if full else 200)
            for pid, records in polled.items():
                for record in records:
                    self._dispatch(pid, record)
            await self._commit(consumer, list(self._progress))

    def _dispatch(self, pid: PartitionId, record: InputRecord) -> None:
        progress = self._progress.setdefault(pid, PartitionProgress())
        progress.dispatched(record.offset)
        state = self._started.state(pid, record.offset)
        if state is not None:  # fetched again: a rebalance handed the partition back
            log.info("event=request_not_rerun partition=%s offset=%d state=%s", pid, record.offset, state)
            if state == "finished":
                progress.finished(record.offset)
            return
        parsed = parse_request(record.value)
        if parsed is None:
            log.warning(
                "event=skipped_record partition=%s offset=%d reason=not_a_validation_request", pid, record.offset
            )
            progress.finished(record.offset)
            return
        self._started.started(pid, record.offset)
        task = asyncio.create_task(self._handle(pid, record.offset, *parsed))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, pid: PartitionId, offset: int, request: OutputEnvelope, spec: ValidationRequested) -> None:
        """One request, to its end. Total: either the result is sent and `validation_finished`
        logged, or a line says why not (stopping; a bug) — the task never dies silently."""
        try:
            outcome = await self._validate(request, spec)
            outcome, value = self._result(request, spec, outcome)
            sent = await self._publish(request, value)
        except asyncio.CancelledError as exc:
            if cancelled_here():
                self._abandoned(request, spec, "cancelled")
                raise
            self._lost(pid, offset, request, spec, exc)
            return
        except Exception as exc:
            self._lost(pid, offset, request, spec, exc)
            return
        if not sent:
            self._abandoned(request, spec, "not_acknowledged")
            return
        self._finished(pid, offset)
        self.results[outcome.status] += 1
        error = "" if outcome.error is None else f" error={outcome.error!r}"
        log.info(
            "event=validation_finished run=%s checkpoint=%s status=%s%s",
            request.subject,
            spec.checkpoint_path,
            outcome.status,
            error,
        )
        self._call_hook(request, spec, outcome)

    async def _validate(self, request: OutputEnvelope, spec: ValidationRequested) -> Outcome:
        timeout = spec.timeout_s if spec.timeout_s is not None else self.default_timeout_s
        log.info(
            "event=validation_started run=%s checkpoint=%s timeout_s=%s", request.subject, spec.checkpoint_path, timeout
        )
        async with self._slots:  # polled batches may hold more requests than may run at once
            return await invoke(self.fn, spec.checkpoint_path, spec.fn_kwargs, timeout)

    @staticmethod
    def _result(request: OutputEnvelope, spec: ValidationRequested, outcome: Outcome) -> tuple[Outcome, bytes]:
        """The result to send and the outcome it reports; VALIDATION_FAILED should building it fail."""
        try:
            return encode_result(request, spec, outcome)
        except BaseException as exc:  # encode_result is total: this is a bug in it
            log.exception(
                "event=result_build_failed run=%s checkpoint=%s error=%r: sending VALIDATION_FAILED instead; "
                "this is a bug in ckptlog, please report it with this traceback",
                request.subject,
                spec.checkpoint_path,
                describe(exc),
            )
            return bare_result(request, spec, f"the evaluator could not build the result: {describe(exc)}")

    def _call_hook(self, request: OutputEnvelope, spec: ValidationRequested, outcome: Outcome) -> None:
        if self._on_result is None:
            return
        try:
            self._on_result(request.subject, spec, outcome)
        except BaseException as exc:  # a broken hook must neither stall the partition nor stop the loop
            log.exception(
                "event=on_result_failed run=%s checkpoint=%s error=%r: the on_result hook raised; the result "
                "was sent and its request is done; fix the hook",
                request.subject,
                spec.checkpoint_path,
                describe(exc),
            )

    def _abandoned(self, request: OutputEnvelope, spec: ValidationRequested, reason: str) -> None:
        """The evaluator is stopping: cancelled past stop_grace_s, or its result not acknowledged."""
        log.warning(
            "event=validation_abandoned run=%s checkpoint=%s reason=%s; the evaluator is stopping: the request "
            "stays uncommitted and the partition's next owner redoes it",
            request.subject,
            spec.checkpoint_path,
            reason,
        )

    def _lost(
        self, pid: PartitionId, offset: int, request: OutputEnvelope, spec: ValidationRequested, exc: BaseException
    ) -> None:
        log.error(
            "event=validation_result_lost run=%s checkpoint=%s partition=%s offset=%d error=%r: no result could be "
            "sent; the request stays uncommitted (its partition commits no further here) and is redone after a "
            "restart or rebalance; this is a bug in ckptlog, please report it with this traceback",
            request.subject,
            spec.checkpoint_path,
            pid,
            offset,
            describe(exc),
            exc_info=exc,
        )
        self._started.forget(pid, offset)

    def _finished(self, pid: PartitionId, offset: int) -> None:
        progress = self._progress.get(pid)
        if progress is not None:
            progress.finished(offset)
        self._started.finished(pid, offset, keep=progress is not None or self._rebalancing)

    async def _publish(self, request: OutputEnvelope, value: bytes) -> bool:
        """Send until acknowledged (backing off) or until stopping."""
        assert self._producer is not None
        delay = RESEND_FIRST_S
        while True:
            try:
                await self._producer.send(self.topics.events, request.subject.encode(), value)
                return True
            except asyncio.CancelledError as exc:
                if cancelled_here():
                    raise
                error: BaseException = exc  # the producer cancelled the send's future under us
            except KafkaIOError as exc:
                error = exc
            if self._stopping.is_set():
                return False
            log.warning(
                "event=result_send_failed run=%s retry_in_s=%.1f error=%r", request.subject, delay, describe(error)
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, RESEND_MAX_S)

    async def _commit(self, consumer: GroupConsumer, pids: Sequence[PartitionId]) -> None:
        offsets = {}
        for pid in pids:
            progress = self._progress.get(pid)
            point = progress.committable() if progress is not None else None
            if point is not None:
                offsets[pid] = point
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except KafkaIOError as exc:
            log.warning("event=commit_failed error=%s", exc)
            return
        for pid, point in offsets.items():
            self._started.committed(pid, point)
            progress = self._progress.get(pid)
            if progress is not None:
                progress.committed = point

    # -- rebalance listener (GroupConsumer's AssignmentListener) ----------------------

    async def _revoked(self, partitions: list[PartitionId]) -> None:
        """Commit what is finished, then drop the progress: the new owner redoes anything unfinished.
        What this process started is remembered (StartedRequests): a partition the rebalance
        hands back is fetched again from its committed offset, and those requests must not rerun."""
        self._rebalancing = True
        if self._consumer is not None:
            await self._commit(self._consumer, [p for p in partitions if p in self._progress])
        for pid in partitions:
            self._progress.pop(pid, None)

    async def _assigned(self, partitions: list[PartitionId]) -> None:
        self._rebalancing = False
        self._started.retain(partitions)
        for pid in partitions:  # a request finishing before its partition's first fetch finds it assigned
            self._progress.setdefault(pid, PartitionProgress())
        log.info(
            "event=partitions_assigned group=%s partitions=%s", self.group_id, ",".join(map(str, partitions)) or "-"
        )
        self.ready.set()

    async def _shutdown(self) -> None:
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=self._grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._consumer is not None:
            if self.ready.is_set():  # joined the group: there may be finished work to commit
                await self._commit(self._consumer, list(self._progress))
            await self._consumer.stop()
        if self._producer is not None:
            await self._producer.stop()
