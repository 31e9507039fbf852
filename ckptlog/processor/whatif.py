"""What-if folds: `ckptlog fold --override-num-to-keep N --override-score-attribute A` (issue 38 item 8).

`--default-num-to-keep` and `--score-*` are the processor's defaults: they reach only runs that sent
no `run_started`, so "what would keeping 5 by val/loss have kept?" could not be asked of the runs
that matter. An `Override` answers it for every run: each `run_started` line of the file is
rewritten with the overridden `checkpoint_config` keys before it is folded (the rest of the line,
its id included, is kept), and the fold's defaults take the same values for runs without one. Only
`ckptlog fold` does this — a file, offline; the processor never folds rewritten events.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

_MARK = b"ckptlog.run_started."


@dataclass(frozen=True, slots=True)
class Override:
    num_to_keep: int | None = None
    score_attribute: str | None = None
    score_order: str | None = None

    def config(self) -> dict[str, Any]:
        """The `checkpoint_config` keys every run_started gets."""
        keys = {
            "num_to_keep": self.num_to_keep,
            "checkpoint_score_attribute": self.score_attribute,
            "checkpoint_score_order": self.score_order,
        }
        return {key: value for key, value in keys.items() if value is not None}

    def defaults(self) -> dict[str, Any]:
        """The ServiceSettings fields of the same values (the fold's config of runs without run_started)."""
        keys = {
            "default_num_to_keep": self.num_to_keep,
            "score_attribute": self.score_attribute,
            "score_order": self.score_order,
        }
        return {key: value for key, value in keys.items() if value is not None}

    def lines(self, lines: Iterable[bytes]) -> Iterator[bytes]:
        """The lines, each run_started rewritten (`line`), the others as they are."""
        for raw in lines:
            yield self.line(raw) if _MARK in raw else raw

    def line(self, raw: bytes) -> bytes:
        """A run_started line with the overridden keys; any other line (or one that is not a JSON
        object) unchanged, so the fold accepts or rejects it as before."""
        try:
            event = json.loads(raw)
        except ValueError:
            return raw
        data = event.get("data") if isinstance(event, dict) else None
        if not isinstance(data, dict) or not str(event.get("type", "")).startswith("ckptlog.run_started."):
            return raw
        config = data.get("checkpoint_config", {})
        if not isinstance(config, dict):  # the fold rejects it: so it stays
            return raw
        data["checkpoint_config"] = {**config, **self.config()}
        return json.dumps(event, separators=(",", ":"), allow_nan=True).encode() + (
            b"\n" if raw.endswith(b"\n") else b""
        )
