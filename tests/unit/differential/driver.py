"""Fold every log in a directory and print what the fold made of each, as bytes to compare across processes:
`python -m tests.unit.differential.driver DIR` (tests/unit/differential/test_compiled_alike.py runs it compiled and
with CKPTLOG_PURE=1). Per log: the `ckptlog fold` document and deletions; each event's effects (outputs,
deletions, rejection, duplicate) folded with outputs on; the snapshot's bytes before and after a restart midway."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from ckptlog import compiled
from ckptlog.events.codec import decode_event
from ckptlog.events.rejections import Rejection
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.snapshot import decode, encode, of_fold
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.foldfile import fold_file_text
from tests.unit.corpus.generated import fold_settings


def _text(value: Any) -> str:
    """A stable text of any value the fold returns (tuples, named tuples, dataclasses, floats: repr)."""
    return repr(value)


def _restored(fold: Fold) -> Fold:
    snapshot = decode(encode(of_fold(fold, "t", 0, 1)))
    return Fold(
        snapshot.settings,
        snapshot.runs,
        refused=snapshot.refused,
        finished=snapshot.finished,
        symlinked=snapshot.symlinked,
        retired=snapshot.retired,
    )


def effects(lines: list[bytes], settings: FoldSettings) -> list[str]:
    """Each line's effects, folding with outputs on and restarting from a snapshot halfway."""
    fold, out = Fold(settings), []
    for number, raw in enumerate(lines):
        if number == len(lines) // 2:
            out.append("snapshot " + encode(of_fold(fold, "t", 0, number)).decode("utf-8", "replace"))
            fold = _restored(fold)
        if not raw.strip():
            continue
        event = decode_event(raw, max_bytes=settings.max_payload_bytes, max_depth=settings.max_depth)
        if isinstance(event, Rejection):
            out.append("decode " + _text(event))
            continue
        try:
            out.append(_text(fold.apply(event)))
        except Exception as exc:  # the same fault in both or a difference: the type and message are compared
            out.append(f"raised {type(exc).__name__}: {exc}")
            fold = _restored(fold)
    out.append("snapshot " + encode(of_fold(fold, "t", 0, len(lines))).decode("utf-8", "replace"))
    return out


def fold_one(path: Path, settings: FoldSettings) -> dict[str, Any]:
    try:
        text, deletions = fold_file_text(path, settings)
        document = [text, _text(deletions)]
    except Exception as exc:
        document = [f"raised {type(exc).__name__}: {exc}"]
    return {"document": document, "effects": effects(path.read_bytes().splitlines(keepends=True), settings)}


def main(directory: str) -> None:
    results: dict[str, Any] = {"runs": compiled.RUNS}
    for path in sorted(Path(directory).glob("*.jsonl")):
        settings = json.loads(path.with_suffix(".settings").read_text())
        limits = {name: settings.pop(name) for name in ("finished_runs_kept", "max_depth") if name in settings}
        results[path.name] = fold_one(path, dataclasses.replace(fold_settings(**settings), **limits))
    sys.stdout.write(json.dumps(results, indent=0))


if __name__ == "__main__":
    main(sys.argv[1])
