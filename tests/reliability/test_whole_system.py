"""The whole-system, model-based, differential test (issue 20), quick version (see whole_system.py).

`test_whole_system`: streams mixing valid runs with every hostile ingredient, through real
`ckptlog run` (restarted with SIGKILL, rebalanced with a second instance) and `ckptlog evaluate`
processes on the real broker and a real tree, every check after every phase.
`CKPTLOG_TEST_SYSTEM_STREAMS` (default 1), `CKPTLOG_TEST_SYSTEM_PHASES` (default 4) and `CKPTLOG_TEST_SYSTEM_SEED`
(default 1) make the long run; `python -m tests.reliability.whole_system --streams N` is the same
outside pytest.

`test_offline_differential`: hypothesis draws the recipes (which ingredients, in which phases) and
folds the streams offline, per partition, three ways that must agree: the service's own
record-by-record fold (`BatchFolder`, what `ckptlog run` does), `ckptlog fold` in one process and
in two. Cheap enough for hypothesis to shrink a failure to its few ingredients
(`CKPTLOG_TEST_SYSTEM_EXAMPLES=300`: more examples, and shrinking).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ckptlog.cli.export import as_line
from ckptlog.events.decoded import CheckpointConfig
from ckptlog.kafka import PartitionId
from ckptlog.kafka.reader import Record
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.state import FoldSettings
from ckptlog.processor.core.view import run_view
from ckptlog.processor.foldfile import fold_file_text
from ckptlog.processor.service.batch import BatchFolder
from ckptlog.processor.service.records import RecordFactory, TopicNames
from tests.reliability.system_checks import env_list, same
from tests.reliability.system_stream import (
    DEFAULT_KEEP,
    FINISHED_KEPT,
    INGREDIENTS,
    MAX_DEPTH,
    MAX_PAYLOAD_BYTES,
    PARTITIONS,
    Line,
    Recipe,
    StreamGenerator,
)
from tests.reliability.whole_system import WITHOUT_ENV, run_stream

STREAMS = int(os.environ.get("CKPTLOG_TEST_SYSTEM_STREAMS", "1"))
PHASES = int(os.environ.get("CKPTLOG_TEST_SYSTEM_PHASES", "4"))
SEED = int(os.environ.get("CKPTLOG_TEST_SYSTEM_SEED", "1"))
EXAMPLES = int(os.environ.get("CKPTLOG_TEST_SYSTEM_EXAMPLES", "25"))
SHRINK = "CKPTLOG_TEST_SYSTEM_EXAMPLES" in os.environ
"""Shrinking a failure (each example forks `ckptlog fold`'s workers) takes a minute or two: the quick
version reports the failing recipe as drawn; a run with CKPTLOG_TEST_SYSTEM_EXAMPLES set shrinks it."""


@pytest.mark.timeout(240 * PHASES)
@pytest.mark.parametrize("seed", range(SEED, SEED + STREAMS))
async def test_whole_system(seed: int, kafka_bootstrap: str, tmp_path: Path) -> None:
    report = await run_stream(kafka_bootstrap, tmp_path, seed, PHASES)
    print(report.summary())
    assert not report.problems, "\n".join([report.summary(), *report.problems])
    assert report.phases == PHASES


def fold_settings(storage: str) -> FoldSettings:
    config = CheckpointConfig(num_to_keep=DEFAULT_KEEP, checkpoint_score_attribute=None, checkpoint_score_order="max")
    return FoldSettings(
        default_config=config,
        default_root=storage,
        outer_root=storage,
        max_payload_bytes=MAX_PAYLOAD_BYTES,
        max_depth=MAX_DEPTH,
        finished_runs_kept=FINISHED_KEPT,
    )


def service_fold(lines: list[Line], partition: int, storage: str) -> dict[str, object]:
    """The views `ckptlog run` folds these records to (its BatchFolder, record by record)."""
    names = TopicNames("in", "checkpoints", "validations", "watermarks", "state", "dlq")
    fold = Fold(fold_settings(storage))
    folder = BatchFolder(fold, RecordFactory(names, PartitionId("in", partition)))
    for offset, line in enumerate(lines):
        folder.fold_records([Record("in", partition, offset, line.key, line.value, ())], 0)
    return {run_id: run_view(run) for run_id, run in fold.runs.items()}


def fold_views(text: str) -> dict[str, object]:
    runs = json.loads(text)["runs"]
    return {run_id: {k: v for k, v in view.items() if k != "evicted"} for run_id, view in runs.items()}


OFFERED = [name for name in INGREDIENTS if name not in env_list(WITHOUT_ENV)]  # WITHOUT_ENV: a temporary switch
phases = st.lists(
    st.tuples(st.sampled_from(["none"]), st.lists(st.sampled_from(OFFERED), min_size=1, max_size=6, unique=True)),
    min_size=1,
    max_size=3,
)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[p for p in Phase if p is not Phase.shrink or SHRINK],
)
@given(drawn=phases, seed=st.integers(0, 2**16))
def test_offline_differential(drawn: list[tuple[str, list[str]]], seed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        gen = StreamGenerator(Path(tmp), seed)
        lines: list[Line] = []
        for number, (action, names) in enumerate(drawn):
            lines += gen.phase(number, Recipe(action, ("valid", *names)), {}).lines
        for partition in range(PARTITIONS):
            mine = [line for line in lines if line.partition == partition]
            path = Path(tmp) / f"p{partition}.jsonl"
            path.write_bytes(b"".join(_exported(line) + b"\n" for line in mine if _exported(line) is not None))
            texts = [fold_file_text(path, fold_settings(gen.storage), workers=w)[0] for w in (1, 2)]
            assert texts[0] == texts[1], f"ckptlog fold --workers 2 differs from --workers 1 (partition {partition})"
            served = service_fold(mine, partition, gen.storage)
            assert same(served, fold_views(texts[0])), (
                f"the service's fold differs from ckptlog fold (partition {partition})"
            )


def _exported(line: Line) -> bytes | None:
    """The line `ckptlog export` writes for the record (None: left out)."""
    return as_line(Record("in", line.partition, 0, line.key, line.value, ()), Counter())
