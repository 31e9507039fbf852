"""How a partition's state is snapshotted: the schedule (every N events or T seconds) and the
background write.

The state is encoded on the event loop (it must be consistent with `next_offset`); the
bytes are written by a worker thread, one write at a time per partition, so the fold keeps
going while storage is slow. Whether a snapshot is taken now is decided in one place,
`Pipeline.snapshot_if_due` (pipeline.py: due, no write in flight, fold equal to the committed state).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ckptlog.errors import CkptlogError
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.snapshot import encode, of_fold
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.service.metrics import NO_METRICS, ServiceMetrics
from ckptlog.processor.storage.snapshots import SnapshotStore

log = logging.getLogger(__name__)


class SnapshotScheduler:
    def __init__(
        self,
        pid: PartitionId,
        store: SnapshotStore,
        every: int,
        interval_s: float,
        last_offset: int | None,
        clock: Callable[[], float] = time.monotonic,
        metrics: ServiceMetrics = NO_METRICS,
    ) -> None:
        self.pid, self.store, self.metrics = pid, store, metrics
        self.every, self.interval_s, self._clock = every, interval_s, clock
        self.last_offset = last_offset
        self.written_at = clock()  # of the last snapshot written (until one is: when this partition was assigned)
        self.last_bytes: int | None = None  # size of the last snapshot written
        self._since_events = 0
        self._last_time = clock()
        self._inflight: asyncio.Task[None] | None = None

    def count(self, events: int) -> None:
        self._since_events += events

    def due(self, next_offset: int, final: bool = False) -> bool:
        """Every N events or T seconds (when something changed); `final`: whenever the state at
        `next_offset` is not yet the newest snapshot."""
        if next_offset == self.last_offset:
            return False
        if final:
            return True
        if self._since_events == 0 and self.last_offset is not None:
            return False
        return self._since_events >= self.every or self._clock() - self._last_time >= self.interval_s

    @property
    def writing(self) -> bool:
        return self._inflight is not None and not self._inflight.done()

    def start(self, fold: Fold, next_offset: int) -> bool:
        """Encode now and write in the background; False while the previous write is still running."""
        if self.writing:
            return False
        started = time.perf_counter()
        data = self._encode(fold, next_offset)
        crash_point("snapshot.encoded")
        self._inflight = asyncio.get_running_loop().create_task(self._write(data, next_offset, started))
        return True

    async def wait(self) -> None:
        if self._inflight is not None:
            await asyncio.shield(self._inflight)

    def _encode(self, fold: Fold, next_offset: int) -> bytes:
        self._since_events = 0
        self._last_time = self._clock()
        started = time.perf_counter()
        data = encode(of_fold(fold, self.pid.topic, self.pid.partition, next_offset))
        log.debug(
            "event=snapshot_encoded partition=%s next_offset=%d bytes=%d runs=%d seconds=%.3f",
            self.pid,
            next_offset,
            len(data),
            len(fold.runs),
            time.perf_counter() - started,
        )
        return data

    async def _write(self, data: bytes, next_offset: int, started: float) -> None:
        try:
            url = await asyncio.to_thread(self.store.write, data, next_offset)
        except CkptlogError as exc:
            self.metrics.snapshot_failed()
            log.error(
                "event=snapshot_failed at=%s@%d error=%r; processing continues and a "
                "restart replays from the previous snapshot — check the snapshot storage",
                self.pid,
                next_offset,
                exc,
            )
            return
        crash_point("snapshot.written")
        self.last_offset, self.last_bytes, self.written_at = next_offset, len(data), self._clock()
        self.metrics.snapshot_written(time.perf_counter() - started)
        log.info("event=snapshot_written at=%s@%d bytes=%d url=%s", self.pid, next_offset, len(data), url)
