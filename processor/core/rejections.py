"""The fold's rejections (SPEC §8), each naming the run and object and saying what to do."""

from __future__ import annotations

from events.rejections import Reason, Rejection
from processor.core.paths import UnsafePath, fast_key, is_within, key_of, normalize, parse_url


def stale_generation(run_id: str, generation: int, current: int) -> Rejection:
    return Rejection(
        Reason.STALE_GENERATION,
        f"run {run_id!r}: report from generation {generation} but the worker "
        f"group is at {current}; drop reports from the old workers",
    )


def check_root(run_id: str, storage_path: str, outer: str | None) -> Rejection | None:
    """Why a run's storage_path is refused (unsafe, or outside the processor's root), else None."""
    try:
        parse_url(storage_path)
    except UnsafePath as exc:
        return Rejection(Reason.UNSAFE_PATH, f"run {run_id!r}: storage_path {exc}; give an absolute URL")
    if outer is not None and normalize(outer) != normalize(storage_path) and not is_within(outer, storage_path):
        return Rejection(
            Reason.PATH_OUTSIDE_ROOT,
            f"run {run_id!r}: storage_path {storage_path!r} is outside "
            f"the processor's storage root {outer!r}; put the run under it",
        )
    return None


def checkpoint_key(run_id: str, path: str, root: str | None, prefix: str, own: bool) -> str | Rejection:
    """The canonical key of a reported checkpoint path below `root` (whose canonical spelling
    plus '/' is `prefix`), or why it cannot be one. `own`: the path is known to be its own key."""
    key = path if own else fast_key(path)
    if key is None:
        try:
            key = key_of(parse_url(path))
        except UnsafePath as exc:
            return Rejection(Reason.UNSAFE_PATH, f"run {run_id!r}: checkpoint path {exc}; report the real directory")
    if root is None:
        return Rejection(
            Reason.NO_STORAGE_ROOT,
            f"run {run_id!r} has no storage root for {path!r}; send "
            "run_started with storage_path first, or start the processor with --storage-root",
        )
    if not key.startswith(prefix):
        return Rejection(
            Reason.PATH_OUTSIDE_ROOT,
            f"run {run_id!r}: checkpoint {path!r} is outside the "
            f"run's storage root {root!r}; save checkpoints under the run's storage_path",
        )
    return key


def duplicate_path(run_id: str, path: str) -> Rejection:
    return Rejection(
        Reason.DUPLICATE_CHECKPOINT_PATH,
        f"run {run_id!r}: checkpoint {path!r} was already reported; save each checkpoint to a new directory",
    )


def conflict(run_id: str, started: bool) -> Rejection:
    """run_started for a run that already has a config (`started`) or checkpoints under the defaults."""
    if not started:
        return Rejection(
            Reason.RUN_STARTED_CONFLICT,
            f"run {run_id!r} already holds checkpoints under the "
            "processor defaults; send run_started before the first checkpoint report",
        )
    return Rejection(
        Reason.RUN_STARTED_CONFLICT,
        f"run {run_id!r} was already started with a different body; a run's config cannot change — start a new run id",
    )
