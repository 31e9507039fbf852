"""Plain PyTorch → ckptlog: a training loop that writes its own checkpoints (`torch.save`, or
`torch.distributed.checkpoint`) reports each one once it is complete, and ckptlog decides what stays.

    import torch.distributed.checkpoint as dcp
    from ckptlog.integrations.torch import CkptlogCheckpoints

    with CkptlogCheckpoints("run-1", "/mnt/ckpts/run-1", num_to_keep=3, checkpoint_score_attribute="val_loss",
                            checkpoint_score_order="min") as checkpoints:
        for step in range(start, steps):
            ...
            path = f"/mnt/ckpts/run-1/step-{step}"
            torch.save(state, path); checkpoints.saved(path, {"val_loss": loss})       # complete now
            checkpoints.saved(path, {"val_loss": loss}, future=dcp.async_save(state, checkpoint_id=path))

- **Complete before reported.** A save given with its `future` (what `dcp.async_save` returns: a
  `Future`, or an `AsyncSaveResponse`, whose `upload_completion` counts) is reported only once the
  future is done, at the next `saved`, `poll` or `wait` (on the training thread: no Kafka I/O in
  DCP's threads), in the order the saves were made; a save whose future failed raises its error there
  and is never reported. Without a future, the file is taken as complete when `saved` is called.
- **One reporter.** With `torch.distributed` initialized, only rank 0 reports (every rank may call
  `saved`); every rank can read the VIEW (`kept`).
- **Resume.** `checkpoints.kept.latest_path()` is the run's latest checkpoint (ckptlog keeps it):
  load it, go on, and a new job under the same run id and root goes on with the same run.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any, Literal, Unpack

from ckptlog.client.connect import Connection
from ckptlog.integrations.inflight import InFlight
from ckptlog.integrations.kept import Kept, retention_note
from ckptlog.integrations.session import RunOptions, TrainerRun

try:
    import torch.distributed as dist
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError("ckptlog.integrations.torch needs PyTorch: pip install 'ckptlog[torch]'") from exc

__all__ = ["CkptlogCheckpoints"]
log = logging.getLogger(__name__)


def rank() -> int:
    """This process's rank in torch.distributed (0 without it)."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


class CkptlogCheckpoints:
    """See the module docstring. `root` is the run's root: every checkpoint path lies below it."""

    def __init__(
        self,
        run_id: str,
        root: str,
        *,
        num_to_keep: int | None = None,
        checkpoint_score_attribute: str | None = None,
        checkpoint_score_order: Literal["max", "min"] = "max",
        bootstrap_servers: str | None = None,
        connection: Connection | None = None,
        **options: Unpack[RunOptions],
    ) -> None:
        self.root = root
        self.retention: dict[str, Any] = {
            "num_to_keep": num_to_keep,
            "checkpoint_score_attribute": checkpoint_score_attribute,
            "checkpoint_score_order": checkpoint_score_order,
        }
        self.ckptlog = TrainerRun(
            run_id, "torch", bootstrap_servers=bootstrap_servers, connection=connection, **options
        )
        self.kept = Kept(self.ckptlog)
        self.inflight = InFlight(self.ckptlog)

    def start(self) -> CkptlogCheckpoints:
        """Announce the run (rank 0; a run with earlier reports goes on as its next worker group)."""
        if rank() == 0 and not self.ckptlog.started:
            world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
            self.ckptlog.start(self.root, self.retention, world)
            rule = "a hand-written top-k rotation"
            retention_note(
                self.ckptlog, rule, self.retention["num_to_keep"], self.retention["checkpoint_score_attribute"]
            )
        return self

    def saved(self, path: str, metrics: dict[str, Any], *, future: Any = None) -> None:
        """`path` was written (or, with `future`, is being written); report it once complete."""
        if self.ckptlog.started:
            self.inflight.add(path, metrics, future)

    def poll(self) -> None:
        """Report every save that is complete and follows only complete ones."""
        self.inflight.poll()

    def wait(self) -> None:
        """Wait for every save in flight, reporting each."""
        self.inflight.wait()

    def close(self, finished: bool = True) -> None:
        """Wait for the saves in flight, send what waits; `finished` with `finish=True` ends the run."""
        try:
            if self.ckptlog.started:
                try:
                    self.wait()
                finally:
                    self.ckptlog.close(finished)
        finally:
            self.kept.close()

    def __enter__(self) -> CkptlogCheckpoints:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(finished=exc_type is None)
