"""`ckptlog fold` writes exactly the golden bytes for every corpus log (tests/unit/corpus/golden.py),
in one process or sharded over several, from a file or from stdin."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from ckptlog.events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH
from ckptlog.events.rejections import Reason
from ckptlog.events.view import RunView
from ckptlog.processor.core.snapshot import canonical
from ckptlog.processor.foldfile import fold_stream_text
from tests.unit import corpus
from tests.unit.corpus.generated import Case
from tests.unit.corpus.golden import fold_case, logs, paths

LOGS = logs()


def per_run(deletions: str) -> dict[str, list[str]]:
    """Deletions grouped by run: across shards only their order within a run is defined."""
    grouped: dict[str, list[str]] = {}
    for line in deletions.splitlines():
        grouped.setdefault(json.loads(line)[0], []).append(line)
    return grouped


@pytest.mark.parametrize("name", list(LOGS))
def test_one_process_writes_the_golden_bytes(tmp_path: Path, name: str) -> None:
    document, evictions = paths(name)
    text, deletions = fold_case(LOGS[name], tmp_path)
    assert text + "\n" == document.read_text(), f"{name}: the document changed (python -m tests.unit.corpus.golden)"
    assert deletions == evictions.read_text()


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("name", list(LOGS))
def test_sharded_folds_write_the_golden_bytes(tmp_path: Path, name: str, workers: int) -> None:
    document, evictions = paths(name)
    text, deletions = fold_case(LOGS[name], tmp_path, workers=workers)
    assert text + "\n" == document.read_text()
    assert per_run(deletions) == per_run(evictions.read_text())


@pytest.mark.parametrize("name", ["rules", "decode", "big_int_scores", "bench_like"])
def test_stdin_and_indent_write_the_same_document(tmp_path: Path, name: str) -> None:
    case = LOGS[name]
    golden = paths(name)[0].read_text()
    streamed, _ = fold_stream_text(io.BytesIO(case.content), case.folding)
    assert streamed + "\n" == golden
    indented, _ = fold_case(case, tmp_path, indent=2)
    assert indented == json.dumps(json.loads(golden), indent=2)


def test_the_corpus_reaches_every_rejection_and_rule() -> None:
    """The hand-written logs alone reach every reason a file can be rejected for (a file has no
    Kafka key, so never `key_mismatch`; `internal_error` needs a fault, tests/unit/core/test_faults.py
    injects them), evictions and every status."""
    reasons, statuses, evicted = set(), set(), 0
    for name in corpus.NASTY:
        document = json.loads(paths(name)[0].read_text())
        reasons |= {r["reason"] for r in document["rejected"]}
        for view in document["runs"].values():
            statuses |= {c["status"] for c in view["checkpoints"]}
            evicted += len(view["evicted"])
    assert reasons == {str(r) for r in Reason} - {Reason.KEY_MISMATCH, Reason.INTERNAL_ERROR}
    assert statuses == {"COMMITTED", "PENDING_VALIDATION", "VALIDATED", "VALIDATION_TIMEOUT", "VALIDATION_FAILED"}
    assert evicted > 10


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=corpus.cases())
def test_generated_logs_fold_alike_in_one_and_two_processes(
    tmp_path_factory: pytest.TempPathFactory, case: Case
) -> None:
    workdir = tmp_path_factory.mktemp("generated")
    one = fold_case(case, workdir)
    two = fold_case(case, workdir, workers=2)
    assert two[0] == one[0]
    assert per_run(two[1]) == per_run(one[1])
    if case.max_bytes == DEFAULT_MAX_BYTES and case.max_depth == DEFAULT_MAX_DEPTH:
        assert fold_stream_text(io.BytesIO(case.content), case.folding)[0] == one[0]


@pytest.mark.parametrize("name", list(LOGS))
def test_golden_views_are_valid_run_views(name: str) -> None:
    """Every run of every golden document is a RunView; `evicted`, which only `ckptlog fold`
    adds, is kept on the model but left out of its dump (the state topic's shape)."""
    document = json.loads(paths(name)[0].read_text())
    for view in document["runs"].values():
        model = RunView.model_validate(view)
        assert model.evicted == view["evicted"]
        published = {key: value for key, value in view.items() if key != "evicted"}
        assert canonical(model.model_dump()) == canonical(published)
