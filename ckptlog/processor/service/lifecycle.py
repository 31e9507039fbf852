"""One input partition's life in this processor, as one state machine (docs/processor.md, Partitions).

    (assigned) -> RESTORING --restored--> REPLAYING --caught_up--> LIVE
                  RESTORING --restore_failed--> RETRYING --retry--> RESTORING
                  REPLAYING, LIVE --broke--> BROKEN --rebuild--> RESTORING
                  any --close--> CLOSED (revoked, dropped, or shut down)

Each assignment of a partition gets a `Partition` of its own; the `Partitions` table holds the
current one per assigned partition and counts rebalances (`epoch`). A restore belongs to the
`Partition` it began for: when it finishes, `Partitions.current(p)` says whether that is still the
table's and no rebalance came between (`settle`) — otherwise the restore is void (it read offsets
another owner may have moved since) and the new assignment restores on its own. Each transition
checks its source phase, so an impossible step is a bug caught where it happens (`LifecycleError`);
the I/O around them (opening, closing, seeking) is the processor's and the task factory's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from ckptlog.errors import CkptlogError
from ckptlog.kafka.records import PartitionId
from ckptlog.processor.service.errors import ServiceError, TooManyRebuilds

if TYPE_CHECKING:
    from ckptlog.processor.service.partition import PartitionTask

MAX_REBUILDS = 5
REBUILD_WINDOW_S = 60.0
RETRY_FIRST_S, RETRY_MAX_S = 0.5, 30.0
"""Backoff of a partition whose restore failed for a transient reason (Kafka or storage I/O)."""


class Phase(StrEnum):
    RESTORING = "restoring"  # assigned; the snapshot and the log's bounds are being read (no task yet)
    RETRYING = "retrying"  # the restore failed for a transient reason; tried again at `retry_at`
    REPLAYING = "replaying"  # the task folds records an earlier owner published: state only
    LIVE = "live"  # caught up: the fold holds the durable state and publishes
    BROKEN = "broken"  # a commit failed: the fold ran ahead of what is durable; restore again
    CLOSED = "closed"  # revoked, dropped or shut down


class LifecycleError(ServiceError):
    """A transition from a phase it cannot start from: a bug in the processor."""


@dataclass(eq=False)
class Partition:
    """One assignment of one input partition; see the module docstring."""

    pid: PartitionId
    epoch: int  # the table's epoch when the current restore began
    phase: Phase = Phase.RESTORING
    task: PartitionTask | None = None
    error: CkptlogError | None = None  # why it is BROKEN (or why the last restore failed)
    attempts: int = 0  # restores failed in a row
    retry_at: float = 0.0
    rebuilds: list[float] = field(default_factory=list)  # when it was restored again after breaking
    clock: Callable[[], float] = time.monotonic

    def _move(self, to: Phase, *sources: Phase) -> None:
        if self.phase not in sources:
            raise LifecycleError(
                f"{self.pid}: cannot go from {self.phase} to {to} (only from {', '.join(sources)}); "
                "please report this as a ckptlog bug"
            )
        self.phase = to

    @property
    def usable(self) -> bool:
        """The task may fold and commit."""
        return self.phase in (Phase.REPLAYING, Phase.LIVE)

    @property
    def live(self) -> bool:
        return self.phase is Phase.LIVE

    @property
    def broken(self) -> CkptlogError | None:
        """Why the task broke (kept when it is then closed), else None."""
        return self.error if self.phase in (Phase.BROKEN, Phase.CLOSED) else None

    def restored(self, task: PartitionTask) -> None:
        """RESTORING -> REPLAYING: the task folds the records an earlier owner published, then
        catches up (`caught_up`; at once when there are none)."""
        self._move(Phase.REPLAYING, Phase.RESTORING)
        self.task, self.attempts, self.error = task, 0, None

    def restore_failed(self, error: CkptlogError) -> float:
        """RESTORING -> RETRYING; the delay before the next attempt (doubling, capped)."""
        self._move(Phase.RETRYING, Phase.RESTORING)
        self.attempts += 1
        self.error = error
        delay = float(min(RETRY_FIRST_S * 2 ** (self.attempts - 1), RETRY_MAX_S))
        self.retry_at = self.clock() + delay
        return delay

    def due(self) -> bool:
        return self.phase is Phase.RETRYING and self.retry_at <= self.clock()

    def retry(self, epoch: int) -> None:
        """RETRYING -> RESTORING."""
        self._move(Phase.RESTORING, Phase.RETRYING)
        self.epoch = epoch

    def caught_up(self) -> None:
        """REPLAYING -> LIVE: the fold now holds exactly the durable state."""
        self._move(Phase.LIVE, Phase.REPLAYING)

    def broke(self, error: CkptlogError) -> None:
        """REPLAYING or LIVE -> BROKEN (a failure while BROKEN or CLOSED keeps the first one)."""
        if self.phase in (Phase.BROKEN, Phase.CLOSED):
            return
        self._move(Phase.BROKEN, Phase.REPLAYING, Phase.LIVE)
        self.error = error

    def rebuild(self, epoch: int) -> PartitionTask | None:
        """BROKEN -> RESTORING: the broken task to close; TooManyRebuilds when it keeps breaking."""
        now = self.clock()
        self.rebuilds = [t for t in self.rebuilds if now - t < REBUILD_WINDOW_S] + [now]
        if len(self.rebuilds) > MAX_REBUILDS:
            raise TooManyRebuilds(
                f"{self.pid} failed {len(self.rebuilds)} times within {REBUILD_WINDOW_S:.0f}s (last: "
                f"{self.error}); stopping — check the broker and the logs above"
            )
        self._move(Phase.RESTORING, Phase.BROKEN)
        task, self.task, self.epoch = self.task, None, epoch
        return task

    def close(self) -> PartitionTask | None:
        """Any phase -> CLOSED; the task to close, if there is one."""
        self.phase = Phase.CLOSED
        task, self.task = self.task, None
        return task


class Partitions:
    """The current `Partition` of every input partition assigned to this processor."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._current: dict[PartitionId, Partition] = {}
        self.epoch = 0  # rebalances seen: a restore begun in an earlier epoch is void
        self._clock = clock

    def assign(self, pid: PartitionId) -> Partition:
        """A new assignment: RESTORING (an assigned partition keeps its current one)."""
        partition = self._current.get(pid)
        if partition is None or partition.phase is Phase.CLOSED:
            partition = self._current[pid] = Partition(pid, self.epoch, clock=self._clock)
        return partition

    def revoke(self, pids: list[PartitionId]) -> list[Partition]:
        """A rebalance: the epoch moves on (every restore in flight is void) and the revoked
        partitions leave the table; they are returned for closing."""
        self.void_restores()
        return [p for pid in pids if (p := self._current.pop(pid, None)) is not None]

    def void_restores(self) -> None:
        """Every restore in flight is void from now on (a rebalance; the processor stopping)."""
        self.epoch += 1

    def current(self, partition: Partition) -> bool:
        """Whether a restore begun for `partition` may take effect: still the table's, no rebalance since."""
        return self._current.get(partition.pid) is partition and partition.epoch == self.epoch

    def get(self, pid: PartitionId) -> Partition | None:
        return self._current.get(pid)

    def __iter__(self) -> Iterator[Partition]:
        return iter(list(self._current.values()))

    def __contains__(self, pid: object) -> bool:
        return pid in self._current

    @property
    def assigned(self) -> frozenset[PartitionId]:
        return frozenset(self._current)

    def tasks(self) -> dict[PartitionId, PartitionTask]:
        """The partitions that have a task (replaying, live or broken), by pid."""
        return {pid: p.task for pid, p in sorted(self._current.items()) if p.task is not None}

    def due(self) -> list[Partition]:
        """Partitions whose restore is due to be tried again."""
        return [p for p in self if p.due()]

    def not_ready(self) -> list[PartitionId]:
        """Assigned partitions whose fold does not hold the durable state yet (or is broken)."""
        return sorted(pid for pid, p in self._current.items() if not p.live)
