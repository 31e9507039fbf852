"""Background deletion of evicted checkpoint directories (SPEC §3 "Retention").

The fold decides *what* to delete and records it as outstanding state; this module only
carries deletions out: off the caller's path, a bounded number at a time, idempotently,
retried with a deterministic backoff, and never outside the run's storage root or the
processor-wide outer bound. A deletion that keeps failing stays outstanding and is logged,
never dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from processor.core.paths import UnsafePath, is_within, normalize, parse_url
from processor.errors import StorageError
from processor.storage.objects import mapped_errors, open_filesystem

log = logging.getLogger(__name__)

Key = tuple[str, str]
"""(run id, checkpoint path URL)."""

_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts per deletion and the wait after each failed one: base, doubling, capped."""

    max_attempts: int = 6
    base_delay: float = 0.1
    max_delay: float = 30.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        return float(min(self.base_delay * 2 ** (attempt - 1), self.max_delay))


def confinement_problem(path: str, root: str, outer_root: str | None = None) -> str | None:
    """Why `path` must not be deleted, or None when it lies strictly under both bounds."""
    if _GLOB_CHARS & set(path):
        return "it has glob characters (*, ?, [) that fsspec would expand"
    for url in (path, root, *([outer_root] if outer_root else [])):
        try:
            protocol = parse_url(url).protocol
        except UnsafePath as exc:
            return str(exc)
        if protocol == "file" and not url.split("://", 1)[-1].startswith("/"):
            return f"{url!r} is a relative local path, which would resolve against the cwd"
    if not is_within(root, path):
        return f"it is not strictly under the run's storage root {root}"
    if outer_root is not None and not is_within(outer_root, path):
        return f"it is not strictly under the processor's storage bound {outer_root}"
    return None


class Deleter:
    """Deletes checkpoint paths in the background; see the module docstring for the rules.

    `storage_options` maps a protocol (`"s3"`) to the fsspec options for URLs of that
    protocol, since one processor serves runs on different backends. Use it from the event
    loop: `submit` schedules tasks on the running loop.
    """

    def __init__(
        self,
        *,
        outer_root: str | None = None,
        on_done: Callable[[str, str], None] | None = None,
        concurrency: int = 8,
        retry: RetryPolicy = RetryPolicy(),
        storage_options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        if concurrency < 1 or retry.max_attempts < 1:
            raise StorageError(
                f"Deleter for {outer_root or 'any root'} needs concurrency >= 1 and "
                f"max_attempts >= 1 (got {concurrency}, {retry.max_attempts}); fix the settings"
            )
        self._outer_root = outer_root
        self._on_done = on_done
        self._retry = retry
        self._options = dict(storage_options or {})
        self._slots = asyncio.Semaphore(concurrency)
        self._outstanding: set[Key] = set()
        self._failed: dict[Key, str] = {}
        self._refused: dict[Key, str] = {}
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self._closed = False

    @property
    def outstanding(self) -> frozenset[Key]:
        """Accepted deletions not yet confirmed gone (in flight, waiting, or failed)."""
        return frozenset(self._outstanding)

    @property
    def failed(self) -> dict[Key, str]:
        """Outstanding deletions whose attempts are exhausted, with the last error."""
        return dict(self._failed)

    @property
    def refused(self) -> dict[Key, str]:
        """Submissions refused by confinement, with why; none of them was touched."""
        return dict(self._refused)

    def submit(self, run_id: str, path: str, root: str) -> bool:
        """Queue deleting `path` for `run_id` without waiting; False when refused.

        A path already in flight is not queued twice; a failed one starts over.
        """
        if self._closed:
            raise StorageError(f"Deleter is closed; cannot delete {path} for run {run_id} — "
                               "submit it to the new Deleter after restart")
        problem = confinement_problem(path, root, self._outer_root)
        if problem is not None:
            self._refused[(run_id, path)] = problem
            log.error("refusing to delete %s for run %s: %s; nothing was deleted — fix the "
                      "checkpoint path or the run's storage root", path, run_id, problem)
            return False
        self._outstanding.add((run_id, path))
        self._start((run_id, path))
        return True

    def retry_failed(self) -> int:
        """Start every failed deletion over; returns how many were restarted."""
        failed = list(self._failed)
        for key in failed:
            self._start(key)
        return len(failed)

    def _start(self, key: Key) -> None:
        self._failed.pop(key, None)
        if key not in self._tasks:
            self._tasks[key] = asyncio.get_running_loop().create_task(self._run(key))

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait for in-flight deletions; True when every accepted one is confirmed gone."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self._tasks:
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            _, pending = await asyncio.wait(list(self._tasks.values()), timeout=remaining)
            if pending:
                return False
        return not self._outstanding

    async def close(self) -> None:
        """Stop all work; interrupted deletions stay in `outstanding` for the next start."""
        self._closed = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, key: Key) -> None:
        run_id, path = key
        last_error = ""
        try:
            for attempt in range(1, self._retry.max_attempts + 1):
                async with self._slots:
                    error = await self._attempt(path)
                if error is None:
                    self._confirmed(key)
                    return
                last_error = error
                if attempt < self._retry.max_attempts:
                    delay = self._retry.delay(attempt)
                    log.warning("deleting %s for run %s failed (attempt %d of %d): %s; "
                                "retrying in %.2fs", path, run_id, attempt,
                                self._retry.max_attempts, error, delay)
                    await asyncio.sleep(delay)
            self._failed[key] = last_error
            log.error("could not delete %s for run %s after %d attempts: %s; it stays "
                      "outstanding — resubmit it or call retry_failed()", path, run_id,
                      self._retry.max_attempts, last_error)
        finally:
            self._tasks.pop(key, None)

    async def _attempt(self, path: str) -> str | None:
        """One deletion attempt in a worker thread: None on success, else why it failed."""
        try:
            await asyncio.to_thread(self._remove, path)
        except StorageError as exc:
            return str(exc)
        except Exception as exc:  # noqa: BLE001 — an unknown backend error must not drop the deletion
            return f"{type(exc).__name__}: {exc}"
        return None

    def _remove(self, url: str) -> None:
        """Delete `url` recursively and confirm it is gone; already gone is success.

        The canonical spelling is what gets deleted, since that is what confinement checked.
        """
        fs, path = open_filesystem(normalize(url), self._options.get(parse_url(url).protocol))
        with mapped_errors(url, "delete"):
            try:
                fs.rm(path, recursive=True)
            except FileNotFoundError:
                pass
            fs.invalidate_cache(path)
            if fs.exists(path):
                raise StorageError(f"{url} still exists after deleting it; check the "
                                   "storage's permissions and whether something re-creates it")

    def _confirmed(self, key: Key) -> None:
        self._outstanding.discard(key)
        self._failed.pop(key, None)
        if self._on_done is None:
            return
        try:
            self._on_done(*key)
        except Exception:  # noqa: BLE001 — the deletion itself succeeded; report, carry on
            log.exception("on_done callback failed for %s (run %s)", key[1], key[0])
