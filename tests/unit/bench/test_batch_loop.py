"""bench.batch_loop: the batch loop with its completions folded back, as the instruction count measures it."""

from __future__ import annotations

import json
from pathlib import Path

from bench.batch_loop import fold_all
from bench.engine import NAMES, PID
from bench.processor import WORKLOADS
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.service.batch import BatchFolder
from ckptlog.processor.service.records import RecordFactory
from ckptlog.processor.service.settings import load_settings


def test_every_eviction_is_settled_by_the_completions_folded_back(tmp_path: Path) -> None:
    root = (tmp_path / "runs").as_uri()
    lines = WORKLOADS["dense"][1](600, root=root)
    inputs = [(json.loads(line)["subject"].encode(), line) for line in lines]
    folder = BatchFolder(Fold(load_settings(None, storage_root=root).fold_settings()), RecordFactory(NAMES, PID))
    made = fold_all(folder, inputs)
    runs = folder.fold.runs.values()
    assert sum(run.evictions for run in runs) > 400  # dense: each report past a run's first few evicts one
    assert not any(run.outstanding for run in runs)  # and the completions settled every one
    assert made > len(inputs)
