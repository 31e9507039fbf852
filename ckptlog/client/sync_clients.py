"""The synchronous flavours, for training scripts: `Reporter` and `Reader`.

Training code is often synchronous (or runs its own loop, e.g. inside Jupyter), so these never
touch the caller's event loop: each wraps its async counterpart (`AsyncReporter`, `AsyncReader`) on a
private event-loop thread (ckptlog.client.loop_thread) and waits for every call.

    with Reporter("run-42") as reporter:
        reporter.report({"loss": 0.1}, "s3://bucket/run-42/ckpt-1")
    with Reader() as reader:
        kept = reader.get_all_reported_checkpoints("run-42", report_index=1, timeout_s=60)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping
from types import TracebackType
from typing import Any, NoReturn, TypeVar

from ckptlog.client.confirm import PROCESSOR_GROUP
from ckptlog.client.connect import EVENTS_TOPIC, STATE_TOPIC, Connection, Topics, connect_now
from ckptlog.client.dead_letters import DLQ_TOPIC
from ckptlog.client.errors import ClientError
from ckptlog.client.evaluator import AsyncEvaluator
from ckptlog.client.event_warnings import CHECKPOINTS_TOPIC
from ckptlog.client.invoke import ValidationFn
from ckptlog.client.loop_thread import LoopThread, blocking
from ckptlog.client.reader import AsyncReader
from ckptlog.client.reporter import SOURCE, AsyncReporter
from ckptlog.client.views import RunView
from ckptlog.events.codec import DEFAULT_LIMITS, DecodeLimits
from ckptlog.events.state import Problem
from ckptlog.kafka.errors import KafkaIOError

T = TypeVar("T")
CLOSE_TIMEOUT_S = 10.0
"""`close()` waits no longer: a producer whose send timed out fails what it still holds at once."""


class Reporter:
    """The synchronous `AsyncReporter`: the same API, run on a private event-loop thread.

    A send waits for the broker up to the connection's `delivery_timeout_s` (CKPTLOG_DELIVERY_TIMEOUT_S,
    default 30 s), then raises `KafkaIOError`; `timeout_s` (default: no more than that) bounds a whole
    call in addition. A confirmed call (`confirm=True`) may also wait up to `confirm_timeout_s` for the
    processor."""

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
        timeout_s: float | None = None,
        confirm: bool = False,
        confirm_timeout_s: float | None = 60.0,
        processor_group: str = PROCESSOR_GROUP,
        dlq_topic: str = DLQ_TOPIC,
        checkpoints_topic: str = CHECKPOINTS_TOPIC,
        state_topic: str = STATE_TOPIC,
        check_score: bool = True,
    ) -> None:
        # a training script learns now, not at its first report hours later: no Kafka, a bad setting
        connection, bootstrap_servers = connect_now(bootstrap_servers, "ckptlog-reporter", connection), None
        self._thread = LoopThread(f"ckptlog-reporter-{run_id}")
        self._timeout, self._started, self._servers = timeout_s, False, connection.bootstrap_servers
        self._async = AsyncReporter(
            run_id,
            bootstrap_servers=bootstrap_servers,
            topic=topic,
            generation=generation,
            first_index=first_index,
            source=source,
            connection=connection,
            confirm=confirm,
            confirm_timeout_s=confirm_timeout_s,
            processor_group=processor_group,
            dlq_topic=dlq_topic,
            checkpoints_topic=checkpoints_topic,
            state_topic=state_topic,
            check_score=check_score,
        )

    @property
    def run_id(self) -> str:
        return self._async.run_id

    @property
    def generation(self) -> int | None:
        return self._async.generation

    @property
    def reports_sent(self) -> int:
        return self._async.reports_sent

    def start(self) -> None:
        """Connect (no time limit: the Kafka client's own timeouts apply); raises
        `NoKafkaConfigured` at once when there is no Kafka to connect to."""
        self._thread.call(self._async.start())

    def _limit(self, confirm: bool | None) -> float | None:
        confirming = self._async.confirm_by_default if confirm is None else confirm
        extra = self._async.confirm_timeout_s if confirming else 0.0
        return None if self._timeout is None or extra is None else self._timeout + extra

    def _call(self, coro: Coroutine[Any, Any, T], timeout_s: float | None) -> T:
        if not self._started:
            try:
                self.start()
            except BaseException:
                coro.close()
                raise
            self._started = True
        try:
            return self._thread.call(coro, timeout_s)
        except concurrent.futures.TimeoutError:
            raise KafkaIOError(
                f"a call of the reporter of run {self.run_id!r} took longer than timeout_s={timeout_s:g} s "
                f"(Kafka at {self._servers}); check the broker, then retry: event ids are deterministic"
            ) from None

    # the senders, derived from AsyncReporter's (loop_thread.blocking): a new method is written there only
    run_started = blocking(AsyncReporter.run_started)
    validation_result = blocking(AsyncReporter.validation_result)
    report = blocking(AsyncReporter.report)
    worker_group_restart = blocking(AsyncReporter.worker_group_restart)
    finish = blocking(AsyncReporter.finish)
    reopen = blocking(AsyncReporter.reopen)
    forget = blocking(AsyncReporter.forget)
    confirm = blocking(AsyncReporter.confirm)

    def close(self) -> None:
        try:
            self._thread.call(self._async.close(), CLOSE_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            pass  # the loop thread goes below: its sockets with it
        finally:
            self._thread.close()

    def __enter__(self) -> Reporter:
        try:
            self.start()
        except BaseException:
            self._thread.close()  # __exit__ will not run: do not leave the loop thread behind
            raise
        self._started = True
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Reader:
    """The synchronous `AsyncReader`: `view`, `runs`, `get_all_reported_checkpoints`, `wait_for` and
    `watch` (a plain iterator), each run on a private event-loop thread.

    `with Reader() as reader: reader.get_all_reported_checkpoints("run-42", 10, timeout_s=60)`."""

    def __init__(
        self,
        *,
        bootstrap_servers: str | None = None,
        topics: Topics | None = None,
        connection: Connection | None = None,
        limits: DecodeLimits = DEFAULT_LIMITS,
    ) -> None:
        # learn now that there is no Kafka (or a bad setting), as the Reporter does
        connection, bootstrap_servers = connect_now(bootstrap_servers, "ckptlog-reader", connection), None
        self._thread = LoopThread("ckptlog-reader")
        self._async = AsyncReader(
            bootstrap_servers=bootstrap_servers, topics=topics, connection=connection, limits=limits
        )

    def start(self) -> None:
        self._thread.call(self._async.start())

    def close(self) -> None:
        try:
            self._thread.call(self._async.close())
        finally:
            self._thread.close()

    def __enter__(self) -> Reader:
        try:
            self.start()
        except BaseException:
            self._thread.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> NoReturn:
        """`async with Reader()` is the old name of the async reader: say so instead of blocking the loop."""
        self._thread.close()
        raise ClientError(
            "ckptlog.Reader is synchronous (`with Reader() as reader:`); in async code use "
            "`async with AsyncReader() as reader:` (the async reader was named Reader before ckptlog 0.2)"
        )

    async def __aexit__(self, *exc_info: object) -> None:  # never reached: __aenter__ raises
        return None

    def _call(self, coro: Coroutine[Any, Any, T], timeout_s: float | None) -> T:
        return self._thread.call(coro, timeout_s)

    def _limit(self, confirm: bool | None) -> float | None:
        return None  # a reader's calls have their own `timeout_s`

    def problem(self, run_id: str) -> Problem | None:
        """Why the run's newest state record (or its VIEW) cannot be read, else None."""
        return self._async.problem(run_id)

    # derived from AsyncReader's (loop_thread.blocking)
    catch_up = blocking(AsyncReader.catch_up)
    view = blocking(AsyncReader.view)
    runs = blocking(AsyncReader.runs)
    get_all_reported_checkpoints = blocking(AsyncReader.get_all_reported_checkpoints)
    wait_for = blocking(AsyncReader.wait_for)

    def watch(self, run_id: str, timeout_s: float | None = None) -> Iterator[RunView]:
        """The run's current VIEW, then each newer one; stops when no change came for `timeout_s`."""
        changes = self._async.watch(run_id)
        try:
            while (view := self._thread.call(_next(changes, timeout_s))) is not None:
                yield view
        finally:
            self._thread.call(_close(changes))


async def _next(changes: AsyncIterator[RunView], timeout_s: float | None) -> RunView | None:
    """The next VIEW, or None after `timeout_s` without one."""
    try:
        return await asyncio.wait_for(anext(changes), timeout_s)
    except TimeoutError:
        return None


async def _close(changes: AsyncIterator[RunView]) -> None:
    close = getattr(changes, "aclose", None)
    if close is not None:
        await close()


class Evaluator:
    """The blocking `AsyncEvaluator`: `Evaluator(fn, concurrency=4).run()` validates until `stop()`
    (from another thread or a signal handler) or Ctrl-C, on an event loop of its own. The options
    are AsyncEvaluator's, checked here."""

    def __init__(self, fn: ValidationFn, **options: Any) -> None:
        self._async = AsyncEvaluator(fn, **options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = False

    @property
    def results(self) -> Mapping[str, int]:
        """How many results of each status were produced."""
        return self._async.results

    @property
    def in_flight(self) -> int:
        return self._async.in_flight

    def run(self) -> None:
        """Consume, validate and report until `stop()`; in async code, `await AsyncEvaluator(...).run()`."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self._main())
            return
        raise ClientError(
            "Evaluator.run() blocks; in async code use `await AsyncEvaluator(fn).run()` (the async evaluator "
            "was named Evaluator before ckptlog 0.2)"
        )

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._stopped:  # stop() came before the loop existed
            return
        await self._async.run()

    def stop(self) -> None:
        """Finish the requests in flight, commit, leave the group (safe from any thread)."""
        self._stopped = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._async.stop)
