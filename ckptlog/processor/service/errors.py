"""Errors of the running service; every message names topic[partition] (and offsets) and the next step."""

from __future__ import annotations

from ckptlog.errors import CkptlogError, OffsetOutOfRange, SnapshotError


class ServiceError(CkptlogError):
    """The processor cannot continue."""


class RestoreError(SnapshotError):
    """A partition's state could not be restored (settings mismatch, snapshot ahead of the log, ...)."""


class TooManyRebuilds(ServiceError):
    """A partition kept failing and being rebuilt; stop instead of looping."""


__all__ = ["OffsetOutOfRange", "RestoreError", "ServiceError", "TooManyRebuilds"]
