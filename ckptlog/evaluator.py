"""`Evaluator`: the worker behind `validation=...` — Ray Train's validation step, as a consumer group.

It consumes `validation_requested` events from the validations topic, runs the user's
`fn(checkpoint_path, **fn_kwargs) -> dict` under the request's `timeout_s` (or the default),
and produces a `validation_result` event to the input topic: VALIDATED with the returned
metrics, VALIDATION_FAILED with the error text, VALIDATION_TIMEOUT.

At least once: a request's offset is committed only after its result was acknowledged, and
never past the lowest unfinished request of its partition (ckptlog.offsets). An evaluator
that dies mid-task leaves the request uncommitted; the group hands it to another member,
which redoes it. The result id is derived from the request id (ckptlog.ids), so the redo's
result is deduplicated by the processor if the first one did get through.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from ckptlog import ids
from ckptlog.bodies import encode_checked, envelope
from ckptlog.connect import Topics, resolve
from ckptlog.errors import FunctionLoadError, InvalidEvent
from ckptlog.invoke import Outcome, ValidationFn, invoke
from ckptlog.offsets import PartitionProgress
from events.outputs import OutputEnvelope, ValidationRequested
from processor.errors import ConfigError
from processor.kafka.clients_io import EventProducer
from processor.kafka.connection import KafkaConnection
from processor.kafka.consumer import GroupConsumer, session_timeout_problem
from processor.kafka.errors import KafkaIOError
from processor.kafka.records import InputRecord, PartitionId

log = logging.getLogger(__name__)

SOURCE = "ckptlog/evaluator"
DEFAULT_GROUP = "ckptlog-evaluators"
TOPIC_POLL_S = 1.0
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


def parse_request(value: bytes | None) -> tuple[OutputEnvelope, ValidationRequested] | None:
    """A validation_requested event, or None for anything else on the topic."""
    if value is None:
        return None
    try:
        event = OutputEnvelope.model_validate_json(value)
        if event.name != "validation_requested":
            return None
        return event, ValidationRequested.model_validate(event.data)
    except ValidationError:
        return None


def result_event(request: OutputEnvelope, spec: ValidationRequested, outcome: Outcome) -> bytes:
    """The validation_result for `request`; a result the processor would refuse (e.g. metrics
    that are not JSON) becomes VALIDATION_FAILED saying why."""
    data: dict[str, Any] = {
        "checkpoint_path": spec.checkpoint_path,
        "status": outcome.status,
        "metrics": outcome.metrics,
        "error": outcome.error,
    }
    event_id = ids.validation_result_id(request.subject, request.id)
    try:
        return encode_checked(envelope("validation_result", request.subject, data, event_id, SOURCE))
    except InvalidEvent as exc:
        data.update(status="VALIDATION_FAILED", metrics={}, error=f"unusable result: {exc}")
        return encode_checked(envelope("validation_result", request.subject, data, event_id, SOURCE))


class Evaluator:
    """`await Evaluator(fn, concurrency=4).run()` until `stop()`."""

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
        connection: KafkaConnection | None = None,
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
                self,
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
        parsed = parse_request(record.value)
        if parsed is None:
            log.warning(
                "event=skipped_record partition=%s offset=%d reason=not_a_validation_request", pid, record.offset
            )
            progress.finished(record.offset)
            return
        task = asyncio.create_task(self._handle(progress, record.offset, *parsed))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(
        self, progress: PartitionProgress, offset: int, request: OutputEnvelope, spec: ValidationRequested
    ) -> None:
        timeout = spec.timeout_s if spec.timeout_s is not None else self.default_timeout_s
        log.info(
            "event=validation_started run=%s checkpoint=%s timeout_s=%s", request.subject, spec.checkpoint_path, timeout
        )
        async with self._slots:  # polled batches may hold more requests than may run at once
            outcome = await invoke(self.fn, spec.checkpoint_path, spec.fn_kwargs, timeout)
        if not await self._publish(request, result_event(request, spec, outcome)):
            return  # stopping before the result was acknowledged: left uncommitted, redone elsewhere
        progress.finished(offset)
        self.results[outcome.status] += 1
        log.info(
            "event=validation_finished run=%s checkpoint=%s status=%s",
            request.subject,
            spec.checkpoint_path,
            outcome.status,
        )
        if self._on_result is not None:
            try:
                self._on_result(request.subject, spec, outcome)
            except Exception:  # a broken hook must not stall the partition
                log.exception("event=on_result_failed run=%s", request.subject)

    async def _publish(self, request: OutputEnvelope, value: bytes) -> bool:
        """Send until acknowledged (backing off) or until stopping."""
        assert self._producer is not None
        delay = 0.5
        while True:
            try:
                await self._producer.send(self.topics.events, request.subject.encode(), value)
                return True
            except KafkaIOError as exc:
                if self._stopping.is_set():
                    return False
                log.warning("event=result_send_failed run=%s retry_in_s=%.1f error=%s", request.subject, delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

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
            progress = self._progress.get(pid)
            if progress is not None:
                progress.committed = point

    # -- rebalance listener (GroupConsumer's AssignmentListener) ----------------------

    async def partitions_revoked(self, partitions: list[PartitionId]) -> None:
        """Commit what is finished, then forget: the new owner redoes anything unfinished."""
        if self._consumer is not None:
            await self._commit(self._consumer, [p for p in partitions if p in self._progress])
        for pid in partitions:
            self._progress.pop(pid, None)

    async def partitions_assigned(self, partitions: list[PartitionId]) -> None:
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
