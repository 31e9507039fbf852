"""Named crash points for the reliability suite's crash matrix (tests/reliability/crash_matrix.py).

`crash_point("commit.after")` does nothing unless the environment variable
`CKPTLOG_CRASH_AT` names that point: `CKPTLOG_CRASH_AT=commit.after@3` kills this process with
SIGKILL — no cleanup, no flush, exactly what `kill -9` does — the third time the point is
reached. The variable is read once, at import; a process without it pays one global read per
point. Points are placed where a crash would be most harmful (between a commit and its
deletions, in the middle of a snapshot write, during a restore), so a test can aim at each of
them instead of hoping a random kill lands there.

`POINTS` lists every point (name `<area>.<moment>` -> where it is); a unit test checks that
it matches the `crash_point(...)` calls in the sources, and the crash matrix aims at each.
"""

from __future__ import annotations

import os
import signal

ENV = "CKPTLOG_CRASH_AT"

POINTS: dict[str, str] = {
    # the pipeline (ckptlog/processor/service/pipeline.py, publish.py)
    "batch.folded": "a batch is folded (state ahead of what is durable), its commit not yet started",
    "commit.before": "the batch's records and offset are about to be committed",
    "commit.after": "the transaction (or publish + offset commit) succeeded; nothing after it ran",
    "commit.published_not_committed": "at_least_once: every output acknowledged, the offset not committed",
    "deletions.before_handover": "the batch with evictions is committed, its deletions not yet handed over",
    "deletions.after_handover": "the batch's deletions were just handed to the Deleter",
    # the Deleter and its completion events (ckptlog/processor/storage, ckptlog/processor/service/completions.py)
    "deletion.job_start": "a deletion job passed the re-check and is about to delete its paths",
    "deletion.after_one": "some paths of a job deleted, none confirmed (in the worker thread)",
    "deletion.confirmed": "a job confirmed its paths gone; no completion event queued yet",
    "completions.before_send": "completion events are about to be produced to the input topic",
    "completions.sent": "completion events were acknowledged by the broker",
    # snapshots (ckptlog/processor/service/snapshotting.py, ckptlog/processor/storage)
    "snapshot.captured": "a snapshot's moment is taken (which runs it writes), none encoded yet; the fold goes on",
    "snapshot.encoded": "the state is encoded, its write not yet started",
    "snapshot.compacting": "a new base replacing a chain of deltas is encoded, not yet written (compaction)",
    "snapshot.before_write": "the snapshot object is about to be written (worker thread)",
    "object.half_written": "half of a local object's bytes are in its temp file",
    "object.before_rename": "a local object's temp file is complete and fsynced, not yet renamed",
    "object.before_put": "a remote object (s3://, memory://...) is about to be put",
    "snapshot.before_prune": "the new snapshot is durable, older ones not yet pruned",
    "snapshot.pruned_one": "one old snapshot was pruned, maybe more to go",
    "snapshot.written": "the snapshot write returned; the schedule not yet told",
    # restore (ckptlog/processor/service/partition_driver.py, restore.py, partition.py)
    "restore.after_fence": "the partition's producer started (exactly_once: previous owner fenced)",
    "restore.snapshot_loaded": "the newest valid snapshot was loaded (or none), the log not yet read",
    "restore.before_seek": "the partition's task is registered, the consumer not yet seeked",
    "restore.caught_up": "the fold reached the group's committed offset; publishing starts",
    "restore.redriven": "the deletions the state owes were handed to the Deleter again",
    # revocation and graceful shutdown (ckptlog/processor/service/pipeline.py)
    "close.before_final_snapshot": "a partition is closing gracefully; its final snapshot not yet taken",
    "close.after_final_snapshot": "the final snapshot is written; the producer not yet stopped",
    # ckptlog replay (ckptlog/processor/service/replay.py)
    "replay.batch": "ckptlog replay is about to fold a batch",
    "replay.before_write": "ckptlog replay folded a partition, its snapshot not yet written",
}


def _parse(spec: str) -> tuple[str, int] | None:
    name, _, count = spec.strip().partition("@")
    if not name:
        return None
    return name, int(count) if count.isdigit() and int(count) > 0 else 1


_TARGET = _parse(os.environ.get(ENV, ""))
_seen = 0


def crash_point(name: str) -> None:
    """Die here with SIGKILL when `CKPTLOG_CRASH_AT` names this point (see the module docstring)."""
    global _seen
    if _TARGET is None or _TARGET[0] != name:
        return
    _seen += 1
    if _seen >= _TARGET[1]:
        os.kill(os.getpid(), signal.SIGKILL)
