"""Deleting a batch of canonical checkpoint URLs in one worker-thread call.

One call per batch, not per path: a thread hop per path cost more than deleting a missing
local path. Every path gets its own outcome (None = confirmed gone, else why not), so one
failing path never fails, or repeats, the others. Local paths (`file://`) are deleted with
`os`/`shutil` directly: fsspec's LocalFileSystem adds ~10 µs of URL handling per path and
follows a symlinked checkpoint into `rmtree` (which refuses it); here a symlink is unlinked,
never followed. Other protocols go through fsspec.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

from processor.core.paths import parse_url
from processor.errors import StorageError
from processor.storage.objects import mapped_errors, open_filesystem

_LOCAL = "file://"
Options = Mapping[str, Mapping[str, Any]]


def remove_all(urls: Sequence[str], options: Options) -> list[str | None]:
    """Delete each URL recursively; per URL None once it is confirmed gone, else the error.

    Already gone counts as deleted. Runs in a worker thread; never raises.
    """
    outcomes: list[str | None] = []
    for url in urls:
        try:
            if url.startswith(_LOCAL):
                _remove_local(url, url[len(_LOCAL):])
            else:
                _remove_fsspec(url, options)
        except StorageError as exc:
            outcomes.append(str(exc))
        except Exception as exc:  # noqa: BLE001 — an unknown backend error must not drop the deletion
            outcomes.append(f"{type(exc).__name__}: {exc}")
        else:
            outcomes.append(None)
    return outcomes


def _remove_local(url: str, path: str) -> None:
    """unlink a file or symlink; rmtree a real directory; then confirm nothing is left.

    The common outcomes (already gone, a file, a symlink) cost one system call and no context manager."""
    try:
        os.unlink(path)
        return  # unlink is atomic: the name is gone
    except FileNotFoundError:
        return
    except OSError:
        pass  # a directory (EISDIR on Linux, EPERM on macOS) or real trouble: the careful path below
    with mapped_errors(url, "delete"):
        if os.path.islink(path) or not os.path.isdir(path):
            try:
                os.unlink(path)  # not a directory: raise (mapped) what unlink says
            except FileNotFoundError:
                pass
            return
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            pass  # removed meanwhile: checked below
        if os.path.lexists(path):
            raise _still_exists(url)


def _remove_fsspec(url: str, options: Options) -> None:
    """Delete through fsspec and confirm with a fresh existence check (listing caches bypassed)."""
    fs, path = open_filesystem(url, options.get(parse_url(url).protocol))
    with mapped_errors(url, "delete"):
        try:
            fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass
        fs.invalidate_cache(path)
        if fs.exists(path):
            raise _still_exists(url)


def _still_exists(url: str) -> StorageError:
    return StorageError(f"{url} still exists after deleting it; check the storage's permissions and whether "
                        "something re-creates it")
