"""Reason codes for rejected input (contract §8). Stable strings: dashboards and the DLQ key on them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Reason(StrEnum):
    PAYLOAD_TOO_LARGE = "payload_too_large"
    TOO_DEEP = "too_deep"
    INVALID_UTF8 = "invalid_utf8"
    INVALID_JSON = "invalid_json"
    INVALID_ENVELOPE = "invalid_envelope"
    UNKNOWN_TYPE = "unknown_type"
    UNKNOWN_VERSION = "unknown_version"
    KEY_MISMATCH = "key_mismatch"
    INVALID_DATA = "invalid_data"
    INVALID_CONFIG = "invalid_config"
    STALE_GENERATION = "stale_generation"
    PATH_OUTSIDE_ROOT = "path_outside_root"
    UNSAFE_PATH = "unsafe_path"
    UNSAFE_STORAGE_ROOT = "unsafe_storage_root"
    NESTED_CHECKPOINT_PATH = "nested_checkpoint_path"
    VALIDATION_WITHOUT_CHECKPOINT = "validation_without_checkpoint"
    NO_STORAGE_ROOT = "no_storage_root"
    DUPLICATE_CHECKPOINT_PATH = "duplicate_checkpoint_path"
    RUN_STARTED_CONFLICT = "run_started_conflict"
    RUN_REFUSED = "run_refused"
    RUN_FINISHED = "run_finished"
    DELETIONS_OWED = "deletions_owed"
    ROOT_BEHIND_SYMLINK = "root_behind_symlink"
    RUN_NOT_FINISHED = "run_not_finished"
    UNKNOWN_RUN = "unknown_run"
    NOT_REOPENABLE = "not_reopenable"
    INTERNAL_ERROR = "internal_error"


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why one input was refused; `message` names the field or object and the fix.
    `exception`: for `internal_error`, the type of the exception the fold raised."""

    reason: Reason
    message: str
    exception: str | None = None
