"""How a partition's state is snapshotted: the schedule (every N events or T seconds), the kind (a
delta on the current chain, or a new base), and the background work.

A snapshot is taken at one moment, when the fold equals the committed state (`Pipeline.snapshot_if_due`,
pipeline.py, decides when, in one place: after a batch's commit, stage 6, or before the next batch
folds): `Capture` (ckptlog/processor/core/delta.py) notes which runs to write (the changed ones for a
delta, all for a base) and copies the small tables. The runs changed since the previous snapshot (a
delta's runs; a base's too: its other runs' entries are the bytes the snapshots before encoded them
to, kept in `Encodings`) are then encoded on the event loop in slices of at most `SLICE_S` while the
fold goes on between them: a run the fold is about to change is encoded first (copy on write), so the
bytes are those of the moment. The object is then sealed
(joined, checksummed) and written by a worker thread, one snapshot at a time per partition, so the
fold keeps going while storage is slow. A new base is due when the chain is long (`--snapshot-deltas`)
or its deltas weigh half as much as its base (`Chain.takes_delta`): that is the compaction, the same
background work writing the whole state, after which the older chain is pruned like any snapshot past
`--keep-snapshots`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial

from ckptlog.errors import CkptlogError
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.core.chain import Chain
from ckptlog.processor.core.delta import Capture, Encodings, sha256_hex
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.snapshot import SCHEMA_VERSION
from ckptlog.processor.failpoints import crash_point
from ckptlog.processor.service.metrics import NO_METRICS, ServiceMetrics
from ckptlog.processor.storage.snapshots import ChainBroken, SnapshotStore

log = logging.getLogger(__name__)

SLICE_S = 0.0005
"""The longest the event loop encodes runs of a snapshot before it lets the other tasks run. While a
snapshot is encoded, every turn of the loop may wait this long behind it, and a report's way to its
committed watermark takes dozens of turns (fetch, produce, the transaction's round trips): 2 ms slices
added tens of ms to each while a base was encoded (bench.incremental_broker --only latency --deltas 5,
two alternated pairs: p99 232 -> 181 ms and 326 -> 198 ms at 0.5 ms). A yield costs ~20 us, so the
encoding's CPU grows by a few percent."""


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
        *,
        chain: Chain | None = None,
        max_deltas: int = 0,
    ) -> None:
        self.pid, self.store, self.metrics = pid, store, metrics
        self.every, self.interval_s, self._clock = every, interval_s, clock
        self.last_offset = last_offset
        self.written_at = clock()  # of the last snapshot written (until one is: when this partition was assigned)
        self.last_bytes: int | None = None  # size of the last snapshot written
        self.chain, self.max_deltas = chain, max_deltas  # the chain the next delta goes on (None: a base next)
        self._since_events = 0
        self._last_time = clock()
        self._inflight: asyncio.Task[None] | None = None
        self.encodings = Encodings()  # the runs' entries as last encoded: a base encodes only the changed ones

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

    def start(self, fold: Fold, next_offset: int, *, final: bool = False) -> bool:
        """Take the snapshot of this moment and encode and write it in the background; False while the
        previous one is still being written. `final` (revocation, stop): a delta whenever the chain
        can take one at all (`Chain.takes_delta`): a base of a big partition takes seconds, while
        the group waits for the revocation callback."""
        if self.writing:
            return False
        self._since_events = 0
        self._last_time = self._clock()
        chain = self.chain
        delta = (
            fold.changed is not None
            and chain is not None
            and chain.takes_delta(self.max_deltas, SCHEMA_VERSION, final=final)
        )
        capture = Capture(
            fold, self.pid.topic, self.pid.partition, next_offset, chain if delta else None, self.encodings
        )
        self._inflight = asyncio.get_running_loop().create_task(self._take(capture, time.perf_counter()))
        return True

    async def wait(self) -> None:
        if self._inflight is not None:
            await asyncio.shield(self._inflight)

    async def _take(self, capture: Capture, started: float) -> None:
        try:
            await _encode(capture)
        except BaseException:
            capture.release()
            capture.give_back()
            capture.keep()
            raise
        crash_point("snapshot.encoded")
        if capture.on is None and self.chain is not None:
            crash_point("snapshot.compacting")
        try:
            data, digest = await asyncio.to_thread(_sealed, capture)
        except BaseException:  # cancelled or a bug: the chain's tip stays, so must the changes; the
            capture.give_back()  # entries are not kept (a cancelled worker may still be reading them)
            raise
        capture.keep()  # sealed: the next snapshot may take its entries (not before: the worker read them)
        log.debug(
            "event=snapshot_encoded partition=%s next_offset=%d kind=%s bytes=%d runs=%d seconds=%.3f",
            self.pid,
            capture.head.next_offset,
            _kind(capture),
            len(data),
            len(capture.order),
            time.perf_counter() - started,
        )
        await self._write(capture, data, digest, started)

    async def _write(self, capture: Capture, data: bytes, digest: str, started: float) -> None:
        next_offset, on = capture.head.next_offset, capture.on
        link = None if on is None else (on.tip_offset, on.tip_sha256[:12])
        try:
            url = await asyncio.to_thread(partial(self.store.write, sha256=digest), data, next_offset, link)
        except BaseException as exc:
            capture.give_back()  # the next snapshot carries these changes too
            if not isinstance(exc, CkptlogError):
                raise  # cancelled, or a bug: the chain's tip did not move, the next delta writes these runs
            if isinstance(exc, ChainBroken):
                self.chain, self._since_events = None, self.every  # a base, at the next chance
                log.warning("event=snapshot_chain_broken at=%s@%d error=%s", self.pid, next_offset, exc)
                return
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
        if on is None:
            self.chain = Chain.based(next_offset, digest, len(data), SCHEMA_VERSION)
        else:
            self.chain = on.extended(next_offset, digest, len(data))
        self.last_offset, self.last_bytes, self.written_at = next_offset, len(data), self._clock()
        self.metrics.snapshot_written(time.perf_counter() - started)
        log.info(
            "event=snapshot_written at=%s@%d kind=%s bytes=%d runs=%d url=%s",
            self.pid,
            next_offset,
            _kind(capture),
            len(data),
            len(capture.order),
            url,
        )


async def _encode(capture: Capture) -> None:
    """Encode the capture's runs in slices of at most SLICE_S, letting the loop run between them."""
    await asyncio.sleep(0)  # the fold may go on at once: what it changes first is encoded first
    crash_point("snapshot.captured")
    while True:
        deadline = time.perf_counter() + SLICE_S
        while capture.step():
            if time.perf_counter() >= deadline:
                break
        else:
            return
        await asyncio.sleep(0)


def _sealed(capture: Capture) -> tuple[bytes, str]:
    """The object's bytes and their SHA-256 (in a worker thread: hashing lets go of the GIL)."""
    data = capture.encoded()
    return data, sha256_hex(data)


def _kind(capture: Capture) -> str:
    return "base" if capture.on is None else f"delta-{capture.on.deltas + 1}"
