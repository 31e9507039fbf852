"""Golden outputs of `ckptlog fold`: the document text and the deletions of every corpus log.

`ckptlog fold`'s output is a public contract, so a change to it must be deliberate. The files
under `golden/` were written by the fold as it was when the compiled engine was retired (the
two engines agreed byte for byte on this corpus then); `tests/unit/foldfile/test_golden.py` checks
the fold still writes exactly these bytes. After a deliberate change to a fold rule, rewrite them
and review the diff:

    python -m tests.unit.corpus.golden --write
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench.workload import events as bench_events
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.foldfile import fold_file_text
from tests.unit.corpus.generated import Case
from tests.unit.corpus.handwritten import NASTY

GOLDEN = Path(__file__).resolve().parent / "golden"


def bench_case(keep: int | None) -> Case:
    content = b"".join(bench_events(reports=500, keep=keep, validation_share=0.1))
    return Case(content, FoldSettings())


def logs() -> dict[str, Case]:
    """Every log with a golden output: the hand-written ones and two benchmark workloads."""
    return {**NASTY, "bench_keep_5": bench_case(5), "bench_keep_all": bench_case(None)}


def fold_case(case: Case, workdir: Path, workers: int = 1, **options: object) -> tuple[str, str]:
    """(document text, deletions as JSON lines) of `ckptlog fold` over the case's log."""
    path = workdir / "events.jsonl"
    path.write_bytes(case.content)
    text, deletions = fold_file_text(path, case.folding, workers=workers, **options)  # type: ignore[arg-type]
    return text, "".join(json.dumps(list(d)) + "\n" for d in deletions)


def paths(name: str) -> tuple[Path, Path]:
    return GOLDEN / f"{name}.json", GOLDEN / f"{name}.deletions.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="rewrite the golden files")
    args = parser.parse_args()
    GOLDEN.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, case in logs().items():
            text, deletions = fold_case(case, Path(tmp))
            document, evictions = paths(name)
            same = document.exists() and document.read_text() == text + "\n"
            same = same and evictions.exists() and evictions.read_text() == deletions
            print(f"{name}: {'unchanged' if same else 'CHANGED'}")
            if args.write and not same:
                document.write_text(text + "\n")
                evictions.write_text(deletions)


if __name__ == "__main__":
    main()
