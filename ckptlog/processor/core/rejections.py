"""The fold's rejections (contract §8), each naming the run and object and saying what to do.

Those a sender can foresee without the run's state are in ckptlog.events.rules (the Reporter raises them too).
"""

from __future__ import annotations

from ckptlog.events.paths import (
    UnsafePath,
    fast_key,
    is_within,
    key_of,
    normalize,
    parse_url,
    root_problem,
    segment_problem,
)
from ckptlog.events.rejections import Reason, Rejection


def stale_generation(run_id: str, generation: int, current: int) -> Rejection:
    return Rejection(
        Reason.STALE_GENERATION,
        f"run {run_id!r}: report from generation {generation} but the worker "
        f"group is at {current}; drop reports from the old workers",
    )


def check_root(run_id: str, storage_path: str, outer: str | None) -> Rejection | None:
    """Why a run's storage_path is refused (unsafe, or outside the processor's root), else None."""
    problem = root_problem(storage_path)
    if problem is not None:
        return Rejection(
            Reason.UNSAFE_STORAGE_ROOT,
            f"run {run_id!r}: storage_path {problem}; give the run an absolute directory of its own, "
            f"e.g. s3://bucket/runs/{run_id}",
        )
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


def implicit_root_problem(run_id: str, default_root: str) -> Rejection | None:
    """Why a run without run_started cannot have `{default_root}/{run id}` as its root, else None."""
    problem = segment_problem(run_id)
    if problem is None:
        return None
    return Rejection(
        Reason.UNSAFE_STORAGE_ROOT,
        f"run {run_id!r} has no run_started, so its root would be {default_root}/{{run id}}, but the run id "
        f"{problem}; send run_started with a storage_path of its own first, or use a run id that is a plain name",
    )


def nested_implicit_root(run_id: str, root: str, other: str) -> Rejection:
    return Rejection(
        Reason.UNSAFE_STORAGE_ROOT,
        f"run {run_id!r} has no run_started, so its root is {root}, which nests with the storage root of run "
        f"{other!r}; send run_started with a storage_path of its own, outside every other run's",
    )


def run_refused(run_id: str, why: str) -> Rejection:
    """An event of a run whose run_started was refused for its root (contract §3): never folded under another root."""
    return Rejection(
        Reason.RUN_REFUSED,
        f"run {run_id!r} is refused: its run_started was refused ({why}); send a corrected run_started "
        "for it before its other events",
    )


def nested_root(run_id: str, storage_path: str, other: str) -> Rejection:
    return Rejection(
        Reason.UNSAFE_STORAGE_ROOT,
        f"run {run_id!r}: storage_path {storage_path!r} nests with the storage root of run {other!r}; "
        "each run needs a directory of its own, outside every other run's (a deletion in one run "
        "would reach the other's checkpoints)",
    )


def nested_path(run_id: str, path: str, other: str) -> Rejection:
    where = "is" if other == path else "lies inside or around"
    return Rejection(
        Reason.NESTED_CHECKPOINT_PATH,
        f"run {run_id!r}: checkpoint {path!r} {where} the live checkpoint {other!r}; deleting one would delete "
        "the other — save each checkpoint to its own directory, side by side",
    )


def internal_error(run_id: str, event_type: str, exc: Exception) -> Rejection:
    return Rejection(
        Reason.INTERNAL_ERROR,
        f"run {run_id!r}: applying this {event_type} raised {type(exc).__name__}: {exc}; the event was not applied "
        "and the run is exactly as before it — please report this as a ckptlog bug, with this dead letter",
        exception=type(exc).__name__,
    )


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


def root_behind_symlink(run_id: str, root: str, seen: str | None = None) -> Rejection:
    """An event of a run refused because its root is reached through a symlink below --storage-root
    (contract §9 *Roots behind a symlink*); `seen`: what the processor found, when it is at hand."""
    found = f" ({seen})" if seen else ""
    return Rejection(
        Reason.ROOT_BEHIND_SYMLINK,
        f"run {run_id!r} is refused: its storage root {root!r} is reached through a symlink below the processor's "
        f"--storage-root{found}; ckptlog never deletes through a link, so its evicted checkpoints would stay in "
        "storage for good. Its events are refused from now on: start the run under a new run id with a "
        "storage_path that has no symlink on the way (or point --storage-root at the link's target)",
    )
