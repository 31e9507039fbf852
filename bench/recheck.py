"""The deleter's event-loop work per path, for instruction counts: `python -m bench.recheck [N] --upto STAGE`.

bench.batch_loop's fold (N dense events, every report evicts one, 5,000-record batches) with the
processor's deletion plumbing on the event loop behind it, and no threads: after each batch its
evictions go to a real `Deleter` (`submit_many`, sorted by run as the processor hands them over:
check 1, confinement), and `--upto recheck` then starts the Deleter's jobs as `_job` does (100 keys
a job, `_cleared`: checks 2 and 3, contract §9) against the real `DeletionOutcomes` and the
partition task's own methods over the fold's state, wired as `ckptlog run` wires them (a claim
writer with nothing pending). No job removes anything (no thread, no walk), so callgrind repeats it
exactly:

    PYTHONHASHSEED=0 valgrind --tool=callgrind python -m bench.recheck 10000 --upto fold
    PYTHONHASHSEED=0 valgrind --tool=callgrind python -m bench.recheck 10000 --upto submit
    PYTHONHASHSEED=0 valgrind --tool=callgrind python -m bench.recheck 10000 --upto recheck

(submit − fold) ÷ paths is check 1 per path, (recheck − submit) ÷ paths checks 2 and 3 per path.
Prints the paths submitted and cleared, and each verdict's count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from bench.batch_loop import BATCH, JOB
from bench.engine import NAMES, PID, consumer_records
from bench.processor import WORKLOADS
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.service.batch import BatchFolder
from ckptlog.processor.service.completions import DeletionOutcomes
from ckptlog.processor.service.partition import PartitionTask
from ckptlog.processor.service.pipeline import run_of
from ckptlog.processor.service.records import RecordFactory
from ckptlog.processor.service.settings import load_settings
from ckptlog.processor.storage.deletion import Deleter

STAGES = ("fold", "submit", "recheck")


class _Usable:
    usable = True


class _Task:
    """A partition task as the deleter's outcomes reach it: `PartitionTask`'s own methods over a fold."""

    owns = PartitionTask.owns
    still_owed_many = PartitionTask.still_owed_many

    def __init__(self, fold: Fold) -> None:
        self.fold, self.pipeline, self.pid = fold, _Usable(), PID


class _NoneHeld:
    """A claim writer with no retired claim pending (the common case)."""

    held: frozenset[str] = frozenset()

    def holds(self, url: str) -> bool:
        return False


def _deleter(outcomes: DeletionOutcomes, outer: str) -> Deleter:
    """Wired as the processor wires it (service/processor.py)."""
    return Deleter(outer_root=outer, claims=_NoneHeld(), recheck_many=outcomes.still_owed_many)


async def run(events: int, upto: str, root: str, outer: str) -> tuple[int, int, Counter[str]]:
    settings = load_settings(None, storage_root=outer)
    inputs = [(json.loads(line)["subject"].encode(), line) for line in WORKLOADS["dense"][1](events, root=root)]
    folder = BatchFolder(Fold(settings.fold_settings()), RecordFactory(NAMES, PID))
    task: Any = _Task(folder.fold)
    outcomes = DeletionOutcomes(lambda: (task,))
    deleter, stage = _deleter(outcomes, outer), STAGES.index(upto)
    records, submitted, cleared, dropped = consumer_records(inputs, 0), 0, 0, Counter[str]()
    for start in range(0, len(records), BATCH):
        batch = folder.fold_records(records[start : start + BATCH], 0)
        if stage >= 1:
            evicted = sorted(batch.deletions, key=run_of)  # as the processor hands them over
            submitted += deleter.submit_many(evicted, str(PID))
        if stage >= 2:
            ready, deleter._ready = deleter._ready, []
            for at in range(0, len(ready), JOB):
                cleared += len(deleter._cleared(ready[at : at + JOB]))
    dropped["dropped"] = deleter.counts.dropped
    await deleter.close()
    return submitted, cleared, dropped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("events", type=int, nargs="?", default=10_000)
    parser.add_argument("--upto", choices=STAGES, default="recheck", help="the last stage run after each batch")
    args = parser.parse_args()
    made = tempfile.mkdtemp(prefix="bench-recheck-")
    try:
        outer = Path(made, "runs").as_uri()
        submitted, cleared, dropped = asyncio.run(run(args.events, args.upto, outer, outer))
        print(f"events={args.events} upto={args.upto} submitted={submitted} cleared={cleared} {dict(dropped)}")
    finally:
        shutil.rmtree(made, ignore_errors=True)


if __name__ == "__main__":
    main()
