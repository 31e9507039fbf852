"""The batch loop alone, for instruction counts: `python -m bench.batch_loop [N] [--setup-only]`.

`BatchFolder.fold_records` over N dense events (bench.processor's workload: every report evicts one)
in 5,000-record batches, plus what a Deleter would write back for each batch's evictions (its runs'
completion records, 100 paths a job, built by `PartitionTask.deletions_settled`) folded back in: the
event loop's in-memory work per event without aiokafka, threads or a clock, so callgrind repeats it
exactly (bench.engine's real Deleter races its claim writer's thread):

    PYTHONHASHSEED=0 valgrind --tool=callgrind python -m bench.batch_loop 10000
    PYTHONHASHSEED=0 valgrind --tool=callgrind python -m bench.batch_loop 10000 --setup-only

(total - setup-only) / N is the cost per event. Prints the records made and the thread's CPU per event.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.engine import NAMES, PID, consumer_records
from bench.processor import WORKLOADS
from ckptlog.kafka.records import OutRecord
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.service.batch import BatchFolder
from ckptlog.processor.service.partition import PartitionTask
from ckptlog.processor.service.pipeline import run_of
from ckptlog.processor.service.records import RecordFactory
from ckptlog.processor.service.settings import load_settings

BATCH = 5000
JOB = 100  # the Deleter's batch_size: the keys one confirmation carries


class _Settling:
    """What `PartitionTask.deletions_settled` reads of its task: the fold, a usable pipeline, the factory."""

    def __init__(self, folder: BatchFolder) -> None:
        self.fold = folder.fold
        self.pipeline = _Usable(folder.factory)


class _Usable:
    usable = True

    def __init__(self, factory: RecordFactory) -> None:
        self.factory = factory


def fold_all(folder: BatchFolder, inputs: list[tuple[bytes, bytes]]) -> int:
    """Every batch folded and its evictions' completions folded back; the records made."""
    task: Any = _Settling(folder)
    records, made, offset = consumer_records(inputs, 0), 0, len(inputs)
    for start in range(0, len(records), BATCH):
        batch = folder.fold_records(records[start : start + BATCH], 0)
        keys = [(d.run_id, d.path) for d in sorted(batch.deletions, key=run_of)]
        completions: list[OutRecord] = []
        for at in range(0, len(keys), JOB):
            completions += PartitionTask.deletions_settled(task, keys[at : at + JOB])
        back = folder.fold_records(consumer_records([(r.key, r.value) for r in completions], offset), 0)
        offset += len(completions)
        made += len(batch.records) + len(back.records)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("events", type=int, nargs="?", default=10_000)
    parser.add_argument("--setup-only", action="store_true", help="build the inputs and the folder, fold nothing")
    args = parser.parse_args()
    made = tempfile.mkdtemp(prefix="bench-batch-loop-")
    try:
        root = Path(made, "runs").as_uri()
        settings = load_settings(None, storage_root=root)
        inputs = [
            (json.loads(line)["subject"].encode(), line) for line in WORKLOADS["dense"][1](args.events, root=root)
        ]
        folder = BatchFolder(Fold(settings.fold_settings()), RecordFactory(NAMES, PID))
        started = time.thread_time()
        records = 0 if args.setup_only else fold_all(folder, inputs)
        cpu = time.thread_time() - started
        print(f"events={args.events} records={records} cpu_us_per_event={cpu / max(args.events, 1) * 1e6:.2f}")
    finally:
        shutil.rmtree(made, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
