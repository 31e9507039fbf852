"""Write-once objects under one fsspec base URL, and the fsspec helpers the storage package shares.

Objects are named relative to the base (`topic/0/snapshot-….json`). Every backend failure
surfaces as `StorageError` naming the full URL, so callers never see fsspec, OS or botocore
exception types.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ckptlog.errors import ObjectMissing, StorageError
from ckptlog.events.paths import unsafe_spelling
from ckptlog.processor.failpoints import crash_point

TEMP_PREFIX = ".tmp-"
"""Basename prefix of in-progress local writes; `list()` never shows them."""

STALE_TEMP_S = 3600.0
"""A temp file this old is what a killed writer left behind (a write takes seconds), not a write in
progress: `sweep_temp` removes it."""


_SDK_ERRORS = (
    ("botocore.exceptions", ("BotoCoreError", "ClientError")),  # s3fs
    ("azure.core.exceptions", ("AzureError",)),  # adlfs
    ("gcsfs.retry", ("HttpError",)),  # gcsfs
    ("google.auth.exceptions", ("GoogleAuthError",)),  # gcsfs's credentials
)


def backend_errors() -> tuple[type[BaseException], ...]:
    """Exception types a storage backend raises for I/O trouble: OS errors, and those of the SDKs
    below s3fs, adlfs and gcsfs. Only SDKs already loaded are looked at: an SDK's error can only come
    from a filesystem that loaded it (and importing gcsfs costs ~0.4 s that no CLI call should pay)."""
    errors: list[type[BaseException]] = [OSError, TimeoutError]
    for module_name, names in _SDK_ERRORS:
        module = sys.modules.get(module_name)
        for name in names if module is not None else ():
            found = getattr(module, name, None)
            if isinstance(found, type) and issubclass(found, BaseException):
                errors.append(found)
    return tuple(errors)


def _setup_errors() -> tuple[type[BaseException], ...]:
    return (ValueError, ImportError, TypeError, *backend_errors())


@contextmanager
def mapped_errors(url: str, action: str) -> Iterator[None]:
    """Re-raise backend failures as `StorageError` naming the URL and the next step (`mapped_error`)."""
    try:
        yield
    except Exception as exc:
        raise mapped_error(exc, url, action)  # noqa: B904 (the cause is set there; `exc` itself as it is)


def mapped_error(exc: Exception, url: str, action: str) -> Exception:
    """What `mapped_errors` raises for `exc`: a `StorageError` as it is, a missing object as
    `ObjectMissing`, a backend failure as `StorageError` naming the URL and the next step (chained
    to `exc`), anything else `exc` itself. For a hot loop that cannot afford a context manager per
    item (the deleter's walk: tree.py), `except Exception as exc: raise mapped_error(exc, ...)`."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, FileNotFoundError):
        missing = ObjectMissing(
            f"could not {action} {url}: it does not exist; it was never written or was "
            "deleted since it was listed — list the prefix to see what is there"
        )
        missing.__cause__ = exc
        return missing
    if isinstance(exc, backend_errors()):  # evaluated only when an exception is raised
        failed = StorageError(
            f"could not {action} {url}: {type(exc).__name__}: {exc}; "
            "check that the storage is reachable and the credentials allow it, then retry"
        )
        failed.__cause__ = exc
        return failed
    return exc


def open_filesystem(
    url: str, storage_options: Mapping[str, Any] | None = None
) -> tuple[fsspec.AbstractFileSystem, str]:
    """Resolve an fsspec URL to (filesystem, backend path), mapping setup errors."""
    try:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    except _setup_errors() as exc:
        raise StorageError(
            f"cannot open storage URL {url}: {exc}; check the URL, install the backend "
            "package (e.g. s3fs for s3://) and the storage options"
        ) from exc
    return fs, str(path).rstrip("/")


def open_protocol(protocol: str, storage_options: Mapping[str, Any] | None = None) -> fsspec.AbstractFileSystem:
    """The filesystem of one protocol, without parsing a URL: no `::` chaining can happen here."""
    try:
        return fsspec.filesystem(protocol, **dict(storage_options or {}))
    except _setup_errors() as exc:
        raise StorageError(
            f"cannot open storage protocol {protocol}://: {exc}; install the backend package "
            "(e.g. s3fs for s3://) and check the storage options"
        ) from exc


def check_name(name: str, base_url: str) -> str:
    """Refuse object names that could escape the base or hide: absolute, `..`, URLs, temp."""
    parts = name.split("/")
    ok = "://" not in name and unsafe_spelling(name) is None and all(p not in ("", ".", "..") for p in parts)
    if not ok or parts[-1].startswith(TEMP_PREFIX):
        raise StorageError(
            f"refusing object name {name!r} under {base_url}: names must be relative "
            f"'a/b/c' paths without '..', '.', empty segments, a protocol or a "
            f"{TEMP_PREFIX!r} basename; fix the caller"
        )
    return name


class ObjectStore:
    """Immutable objects under one base URL (`file://`, a local path, `memory://`, `s3://`…)."""

    def __init__(self, base_url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self._fs, self._root = open_filesystem(base_url, storage_options)
        protocol, sep, rest = base_url.partition("://")
        self.base_url = f"{protocol}{sep}{rest.rstrip('/')}" if sep else base_url.rstrip("/")
        if self._root.strip("/") == "":
            raise StorageError(
                f"storage URL {base_url!r} names a filesystem root; give a directory or "
                "bucket such as file:///var/lib/ckptlog or s3://bucket/ckptlog"
            )
        self._local = isinstance(self._fs, LocalFileSystem)

    def url(self, name: str) -> str:
        """The full URL of object `name`, as used in log lines and error messages."""
        return f"{self.base_url}/{name}"

    def _path(self, name: str) -> str:
        return f"{self._root}/{check_name(name, self.base_url)}"

    def put_immutable(self, name: str, data: bytes) -> None:
        """Write `name` once; identical bytes again is a no-op, different bytes are refused."""
        path, url = self._path(name), self.url(name)
        existing = self._read_if_exists(path, url)
        if existing is None:
            with mapped_errors(url, "write"):
                try:
                    self._write_new(path, data)
                    return
                except FileExistsError:  # lost a race with another writer: compare below
                    pass
            existing = self._read_if_exists(path, url)
        if existing != data:
            raise StorageError(
                f"{url} already exists with different content; objects are write-once, "
                "so write the new content under a new name"
            )

    def _write_new(self, path: str, data: bytes) -> None:
        if self._local:
            _write_local_atomic(path, data)
        else:
            # "create" is an exclusive put (S3 If-None-Match) where the backend has one.
            crash_point("object.before_put")
            self._fs.pipe_file(path, data, mode="create")

    def _read_if_exists(self, path: str, url: str) -> bytes | None:
        with mapped_errors(url, "read"):
            try:
                return bytes(self._fs.cat_file(path))
            except FileNotFoundError:
                return None

    def get(self, name: str) -> bytes:
        """The object's bytes; a missing object is a `StorageError` too."""
        with mapped_errors(self.url(name), "read"):
            return bytes(self._fs.cat_file(self._path(name)))

    def exists(self, name: str) -> bool:
        """Whether `name` exists now (listing caches are bypassed)."""
        path = self._path(name)
        with mapped_errors(self.url(name), "check"):
            self._fs.invalidate_cache(path)
            return bool(self._fs.isfile(path))

    def delete(self, name: str) -> None:
        """Remove `name`; an object that is already gone counts as deleted."""
        path = self._path(name)
        with mapped_errors(self.url(name), "delete"):
            try:
                self._fs.rm_file(path)
            except FileNotFoundError:
                pass

    def sweep_temp(self, directory: str, older_than_s: float = STALE_TEMP_S) -> int:
        """Remove the temp files of local writes killed mid-way (SIGKILL skips their cleanup) from
        `directory`, if older than `older_than_s`; how many. Other backends write in one put: none."""
        if not self._local:
            return 0
        path, removed = f"{self._root}/{check_name(directory, self.base_url)}", 0
        with mapped_errors(f"{self.base_url}/{directory}", "clean up"):
            try:
                entries = list(os.scandir(path))
            except FileNotFoundError:
                return 0
            for entry in entries:
                stale = time.time() - entry.stat(follow_symlinks=False).st_mtime > older_than_s
                if entry.name.startswith(TEMP_PREFIX) and entry.is_file(follow_symlinks=False) and stale:
                    os.unlink(entry.path)
                    removed += 1
        return removed

    def list(self, prefix: str = "") -> list[str]:
        """Sorted names (relative to the base) of every object whose name starts with `prefix`."""
        directory = prefix.rpartition("/")[0]
        if directory:
            check_name(directory, self.base_url)
        top = f"{self._root}/{directory}".rstrip("/")
        with mapped_errors(f"{self.base_url}/{directory}", "list"):
            self._fs.invalidate_cache(top)
            found = self._fs.find(top)
        lead = f"{self._root}/"
        names = (str(p).rstrip("/") for p in found)
        return sorted(
            n[len(lead) :]
            for n in names
            if n.startswith(lead + prefix) and not n.rpartition("/")[2].startswith(TEMP_PREFIX)
        )


def _write_local_atomic(path: str, data: bytes) -> None:
    """Temp file in the same directory, fsync, rename: readers never see a partial object."""
    directory, _, base = path.rpartition("/")
    os.makedirs(directory, exist_ok=True)
    tmp = f"{directory}/{TEMP_PREFIX}{uuid.uuid4().hex}-{base}"
    try:
        with open(tmp, "wb") as f:
            view = memoryview(data)  # halves without copying them (a snapshot may be 100 MB)
            f.write(view[: len(data) // 2])
            crash_point("object.half_written")
            f.write(view[len(data) // 2 :])
            f.flush()
            os.fsync(f.fileno())
        crash_point("object.before_rename")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
