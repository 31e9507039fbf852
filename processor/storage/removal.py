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

    Already gone counts as deleted. Runs in a worker thread; never raises. The common local
    outcomes (already gone, a file, a symlink) cost one system call and no further frame: this
    loop holds the GIL, which the event loop needs."""
    outcomes: list[str | None] = []
    append, unlink, skip = outcomes.append, os.unlink, len(_LOCAL)
    for url in urls:
        if url.startswith(_LOCAL):
            try:
                unlink(url[skip:])  # atomic: the name is gone
                append(None)
                continue
            except FileNotFoundError:
                append(None)
                continue
            except Exception:
                pass  # the careful path deletes it or says why not
        append(_remove_one(url, options))
    return outcomes


def _remove_one(url: str, options: Options) -> str | None:
    try:
        if url.startswith(_LOCAL):
            _remove_local_tree(url, url[len(_LOCAL) :])
        else:
            _remove_fsspec(url, options)
    except StorageError as exc:
        return str(exc)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _remove_local_tree(url: str, path: str) -> None:
    """After unlink refused `path`: unlink a symlink or file, rmtree a real directory (never following
    a symlink), then confirm nothing is left."""
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
    return StorageError(
        f"{url} still exists after deleting it; check the storage's permissions and whether something re-creates it"
    )
