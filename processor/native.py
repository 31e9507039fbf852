"""The compiled engine for `ckptlog fold` (native/, the `ckptlog_native` extension).

It folds a file the way processor/foldfile.py `fold_lines` does, several times faster: it reads
the lines itself, decodes the common events in Rust and keeps the state in Rust. Everything
else is asked of `Support` here, so the Python code stays the one statement of those rules:
the decoder for every line the native fast path refuses (and so every rejection message),
the fold's rejections (processor/core/rejections.py), path arithmetic and scoring for the
rare spellings. Where it cannot be sure to match the Python fold it raises `Unsupported`,
and the caller folds in Python instead. tests/unit/test_native_fold.py checks the two agree.

The extension is optional: without it (no Rust toolchain at install time) `available()` is
False and `ckptlog fold` uses the Python fold.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import msgspec

from events.codec import decode_event
from events.fastpath import FAST_MAX_DEPTH, FastDeletionCompleted, FastReport, FastValidationResult
from events.models import DeletionCompleted, Report, ValidationResult, WorkerGroupRestart
from events.rejections import Rejection
from processor.core import rejections
from processor.core.outputs import Deletion
from processor.core.paths import UnsafePath, normalize
from processor.core.scoring import score
from processor.core.state import FoldSettings, root_prefix
from processor.errors import ConfigError
from processor.sharding import Shards

try:
    import ckptlog_native
except ImportError:  # built by `make venv` when cargo is present; optional
    ckptlog_native = None  # type: ignore[assignment]

ENGINES = ("auto", "native", "python")
BATCH_LINES = 65_536  # lines handed to the engine per call when it does not read the file itself
_EXACT = 2**53
_load = msgspec.json.Decoder().decode
Pair = tuple[str, str]


def available() -> bool:
    return ckptlog_native is not None


def use_native(engine: str) -> bool:
    """Whether to fold natively: `auto` means yes when the extension is built, unless the
    environment says otherwise (CKPTLOG_ENGINE=python|native|auto)."""
    if engine not in ENGINES:
        raise ConfigError(f"--engine must be one of {', '.join(ENGINES)} (got {engine!r})")
    if engine == "auto":
        engine = os.environ.get("CKPTLOG_ENGINE") or "auto"
        if engine not in ENGINES:
            raise ConfigError(
                f"CKPTLOG_ENGINE must be one of {', '.join(ENGINES)} (got {engine!r}); unset it "
                "to use the compiled engine when installed"
            )
    if engine == "native" and not available():
        raise ConfigError(
            "--engine native: the ckptlog_native extension is not installed; run `make venv` "
            "with a Rust toolchain (cargo) on PATH, or use --engine python"
        )
    return engine != "python" and available()


class Unsupported(Exception):
    """Raised in place of the extension's own `Unsupported` when the extension is missing."""


UNSUPPORTED: type[Exception] = ckptlog_native.Unsupported if ckptlog_native is not None else Unsupported


def _pair(rejection: Rejection) -> Pair:
    return str(rejection.reason), rejection.message


class Support:
    """What the native engine asks of Python (native/src/support.rs names each method)."""

    def __init__(self, settings: FoldSettings, max_bytes: int, max_depth: int) -> None:
        self.outer = settings.outer_root
        self.max_bytes, self.max_depth = max_bytes, max_depth

    def decode(self, raw: bytes) -> tuple[Any, ...]:
        """events.codec.decode_event, flattened to a tuple tagged by event type (0: rejected)."""
        event = decode_event(raw, max_bytes=self.max_bytes, max_depth=self.max_depth)
        if isinstance(event, Rejection):
            return (0, *_pair(event))
        if isinstance(event, (Report, FastReport)):
            data = event.data
            path = data.checkpoint.path if data.checkpoint is not None else None
            return 1, event.id, event.subject, data.generation, path, data.metrics, data.validation is not False
        if isinstance(event, (ValidationResult, FastValidationResult)):
            result = event.data
            return 2, event.id, event.subject, result.checkpoint_path, result.status, result.metrics
        if isinstance(event, (DeletionCompleted, FastDeletionCompleted)):
            return 3, event.id, event.subject, list(event.data.checkpoint_paths)
        if isinstance(event, WorkerGroupRestart):
            return 4, event.id, event.subject
        started, config = event.data, event.data.checkpoint_config
        return (
            5,
            event.id,
            event.subject,
            started,
            started.storage_path,
            config.num_to_keep,
            config.checkpoint_score_attribute,
            config.checkpoint_score_order == "max",
        )

    def stale_generation(self, run_id: str, generation: int, current: int) -> Pair:
        return _pair(rejections.stale_generation(run_id, generation, current))

    def check_root(self, run_id: str, storage_path: str) -> Pair | None:
        problem = rejections.check_root(run_id, storage_path, self.outer)
        return None if problem is None else _pair(problem)

    def checkpoint_key(self, run_id: str, path: str, root: str | None, prefix: str, own: bool) -> str | Pair:
        key = rejections.checkpoint_key(run_id, path, root, prefix, own)
        return key if isinstance(key, str) else _pair(key)

    def duplicate_path(self, run_id: str, path: str) -> Pair:
        return _pair(rejections.duplicate_path(run_id, path))

    def conflict(self, run_id: str, started: bool) -> Pair:
        return _pair(rejections.conflict(run_id, started))

    def normalize(self, path: str) -> str | None:
        try:
            return normalize(path)
        except UnsafePath:
            return None

    def root_prefix(self, root: str | None) -> str:
        return root_prefix(root)

    def dumps(self, value: Any) -> str:
        return json.dumps(value)

    def load_metrics(self, text: str) -> Any:
        return _load(text)

    def merge_metrics(self, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        return {**old, **new}

    def score(self, metrics: dict[str, Any], attribute: str, order_max: bool) -> tuple[bool, float, bool]:
        """(has, value, exact): an int score beyond 2**53 is not exact as a float."""
        has, value, _ = score(metrics, attribute, "max" if order_max else "min")
        if type(value) is not float and not -_EXACT <= value <= _EXACT:
            return has, 0.0, False
        return has, float(value), True


@dataclass(slots=True)
class NativeResult:
    """What `fold_lines` yields, as the document needs it: views already built."""

    runs: list[tuple[int, str, Any]]  # (line that created it, run id, VIEW + evicted: a dict, or its JSON text)
    rejected: list[dict[str, Any]]
    deletions: list[Deletion] = field(default_factory=list)
    applied: int = 0
    duplicates: int = 0

    def document(self) -> dict[str, Any]:
        return {"runs": {run_id: view for _, run_id, view in self.runs}, "rejected": self.rejected}


def new_engine(
    settings: FoldSettings | None, *, max_bytes: int, max_depth: int, shard: tuple[int, Shards] | None = None
) -> ckptlog_native.NativeFold:
    """A `ckptlog_native.NativeFold` for these settings (the benchmark feeds it directly)."""
    assert ckptlog_native is not None, "check available() first"
    settings = settings or FoldSettings()
    config = settings.default_config
    defaults = (
        config.num_to_keep,
        config.checkpoint_score_attribute,
        config.checkpoint_score_order == "max",
        settings.default_root,
        root_prefix(settings.default_root),
        settings.dedup_window,
    )
    planned = None
    if shard is not None:
        mine, shards = shard
        planned = (mine, shards.count, dict(shards.planned))
    return ckptlog_native.NativeFold(
        Support(settings, max_bytes, max_depth), defaults, max_bytes, max_depth >= FAST_MAX_DEPTH, planned
    )


def fold(
    source: Path | Iterable[bytes],
    settings: FoldSettings | None,
    *,
    max_bytes: int,
    max_depth: int,
    shard: tuple[int, Shards] | None = None,
    progress: Callable[[int, int], None] | None = None,
    progress_mask: int = 65_535,
    with_deletions: bool = True,
    as_text: bool = False,
) -> NativeResult:
    """Fold a file (read by the extension) or an iterable of lines; raises UNSUPPORTED when
    only the Python fold can be sure of the result. `with_deletions=False` leaves
    `deletions` empty (a dry run needs none; a million tuples cost half a second). `as_text`:
    each view comes as the JSON text `json.dumps` would write, built in Rust."""
    engine = new_engine(settings, max_bytes=max_bytes, max_depth=max_depth, shard=shard)
    if isinstance(source, Path):
        engine.feed_file(str(source), progress, progress_mask)
    else:
        lines = iter(source)
        while batch := list(islice(lines, BATCH_LINES)):
            engine.feed_lines(batch)
    runs, rejected, deletions, applied, duplicates = engine.result(with_deletions, as_text)
    return NativeResult(runs, rejected, [Deletion(*d) for d in deletions], applied, duplicates)
