"""The compiled fold engine (`engine="native"`) folds every log to the very bytes the Python one does.

`ckptlog fold`'s output is a contract (SPEC §4 views, rejections with line, reason and message),
so the native engine must match the Python engine byte for byte: the document text and the
deletions, for every fold rule and every decode path. The logs come from tests/unit/corpus/:
hypothesis-generated small logs, hand-written nasty ones, and the benchmark's workload.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from bench.workload import events as bench_events
from events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH
from events.rejections import Reason
from processor import native
from processor.core.state import FoldSettings
from processor.foldfile import fold_file, fold_file_text
from tests.unit import corpus
from tests.unit.corpus import NASTY, Case
from tests.unit.native_required import ckptlog_native

ckptlog_native()  # fails here, not as a skip, when cargo could have built it
PROFILE = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
Deletions = list[tuple[str, str, str]]


def _engine(engine: str) -> dict[str, Any]:
    return {"engine": engine}


def fold_with(
    engine: str,
    path: Path,
    settings: FoldSettings,
    workers: int = 1,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    **options: Any,
) -> tuple[str, Deletions]:
    """`fold_file_text` with one engine; deletions as plain tuples (a native engine may not build NamedTuples)."""
    text, deletions = fold_file_text(
        path, settings, workers=workers, max_bytes=max_bytes, max_depth=max_depth, **options, **_engine(engine)
    )
    return text, [tuple(d) for d in deletions]  # type: ignore[misc]


def fold_doc_with(
    engine: str,
    path: Path,
    settings: FoldSettings,
    workers: int = 1,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> tuple[str, Deletions]:
    """`fold_file` (the document as a dict), encoded as the CLI would: same values, same types."""
    document, deletions = fold_file(
        path, settings, workers=workers, max_bytes=max_bytes, max_depth=max_depth, **_engine(engine)
    )
    return json.dumps(document), [tuple(d) for d in deletions]  # type: ignore[misc]


# -- comparing -----------------------------------------------------------------------------


def _first_difference(expected: Any, actual: Any, where: str = "") -> str:
    """Where two parsed documents first differ, e.g. `runs['a'].checkpoints[2].metrics`."""
    if type(expected) is not type(actual):
        return (
            f"{where or 'document'}: {expected!r} ({type(expected).__name__}) vs {actual!r} ({type(actual).__name__})"
        )
    if isinstance(expected, dict):
        if list(expected) != list(actual):
            return f"{where or 'document'} keys: {list(expected)!r} vs {list(actual)!r}"
        for k in expected:
            found = _first_difference(expected[k], actual[k], f"{where}[{k!r}]")
            if found:
                return found
        return ""
    if isinstance(expected, list):
        for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
            found = _first_difference(e, a, f"{where}[{i}]")
            if found:
                return found
        return "" if len(expected) == len(actual) else f"{where}: {len(expected)} items vs {len(actual)}"
    if repr(expected) != repr(actual):  # repr: NaN equals NaN, 1 differs from 1.0, -0.0 from 0.0
        return f"{where}: {expected!r} vs {actual!r}"
    return ""


def assert_same_text(expected: str, actual: str) -> None:
    if expected == actual:
        return
    at = next(
        (i for i, (e, a) in enumerate(zip(expected, actual, strict=False)) if e != a), min(len(expected), len(actual))
    )
    try:
        where = _first_difference(json.loads(expected), json.loads(actual))
    except ValueError as exc:
        where = f"(native text is not JSON: {exc})"
    raise AssertionError(
        f"documents differ at char {at}: {where or 'same values, different spelling'}\n"
        f"  python: {expected[max(0, at - 120) : at + 120]!r}\n"
        f"  native: {actual[max(0, at - 120) : at + 120]!r}"
    )


def assert_same(expected: tuple[str, Deletions], actual: tuple[str, Deletions], *, same_order: bool = True) -> None:
    """Same document text and deletions. Across worker counts the deletions are compared per run:
    each shard returns its own, so only their order within a run is defined."""
    assert_same_text(expected[0], actual[0])
    if same_order:
        assert actual[1] == expected[1]
    else:
        assert per_run(actual[1]) == per_run(expected[1])


def per_run(deletions: Deletions) -> dict[str, Deletions]:
    grouped: dict[str, Deletions] = defaultdict(list)
    for deletion in deletions:
        grouped[deletion[0]].append(deletion)
    return dict(grouped)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("native_fold")


def write(workdir: Path, case: Case, name: str = "events.jsonl") -> Path:
    path = workdir / name
    path.write_bytes(case.content)
    return path


def limits(case: Case) -> dict[str, int]:
    return {"max_bytes": case.max_bytes, "max_depth": case.max_depth}


# -- the tests -----------------------------------------------------------------------------


@PROFILE
@given(case=corpus.cases())
def test_engines_agree(workdir: Path, case: Case) -> None:
    path = write(workdir, case)
    expected = fold_with("python", path, case.settings, **limits(case))
    assert_same(expected, fold_with("native", path, case.settings, **limits(case)))


@settings(PROFILE, max_examples=25)
@given(case=corpus.cases())
def test_native_in_two_workers_agrees_with_python_in_one(workdir: Path, case: Case) -> None:
    path = write(workdir, case)
    expected = fold_with("python", path, case.settings, **limits(case))
    assert_same(expected, fold_with("native", path, case.settings, workers=2, **limits(case)), same_order=False)


@pytest.mark.parametrize("name", list(NASTY))
def test_engines_agree_on_nasty_logs(workdir: Path, name: str) -> None:
    case = NASTY[name]
    path = write(workdir, case, f"{name}.jsonl")
    expected = fold_with("python", path, case.settings, **limits(case))
    assert_same(expected, fold_with("native", path, case.settings, **limits(case)))
    assert_same(expected, fold_with("native", path, case.settings, workers=2, **limits(case)), same_order=False)
    assert_same(expected, fold_with("native", path, case.settings, workers=3, **limits(case)), same_order=False)
    assert_same(
        fold_with("python", path, case.settings, indent=2, **limits(case)),
        fold_with("native", path, case.settings, indent=2, **limits(case)),
    )
    assert_same(
        fold_doc_with("python", path, case.settings, **limits(case)),
        fold_doc_with("native", path, case.settings, **limits(case)),
    )
    dry = fold_with("python", path, case.settings, with_deletions=False, **limits(case))
    assert_same_text(dry[0], fold_with("native", path, case.settings, with_deletions=False, **limits(case))[0])


@pytest.mark.parametrize("keep", [5, None])
def test_engines_agree_on_the_benchmark_workload(workdir: Path, keep: int | None) -> None:
    path = workdir / f"bench-{keep}.jsonl"
    path.write_bytes(b"".join(bench_events(reports=3000, keep=keep, validation_share=0.1)))
    settings_ = FoldSettings()
    expected = fold_with("python", path, settings_)
    assert_same(expected, fold_with("native", path, settings_))
    assert_same(expected, fold_with("native", path, settings_, workers=2), same_order=False)
    if keep is not None:
        assert expected[1], "the workload evicts at keep=5"


def native_fold_itself(
    path: Path, settings: FoldSettings, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH
) -> None:
    """Fold with the extension alone: it raises its Unsupported where `engine="native"` would hand
    the file back to the Python fold (and the comparisons above would compare Python with itself)."""
    native.fold(path, settings, max_bytes=max_bytes, max_depth=max_depth)


@pytest.mark.parametrize("name", [name for name in NASTY if not name.startswith("big_int")])
def test_native_engine_folds_the_nasty_logs_itself(workdir: Path, name: str) -> None:
    case = NASTY[name]
    native_fold_itself(write(workdir, case, f"{name}.jsonl"), case.settings, **limits(case))


@pytest.mark.parametrize("keep", [5, None])
def test_native_engine_folds_the_benchmark_workload_itself(workdir: Path, keep: int | None) -> None:
    path = workdir / f"bench-{keep}.jsonl"
    path.write_bytes(b"".join(bench_events(reports=3000, keep=keep, validation_share=0.1)))
    native_fold_itself(path, FoldSettings())


def test_nasty_logs_reach_every_rejection_and_rule(workdir: Path) -> None:
    """The hand-written logs alone reach every reason a file can be rejected for (a file has no
    Kafka key, so never `key_mismatch`), evictions, every status and a deleted eviction."""
    reasons, statuses, evicted = set(), set(), 0
    for name, case in NASTY.items():
        text, _ = fold_with("python", write(workdir, case, f"{name}.jsonl"), case.settings, **limits(case))
        document = json.loads(text)
        reasons |= {r["reason"] for r in document["rejected"]}
        for view in document["runs"].values():
            statuses |= {c["status"] for c in view["checkpoints"]}
            evicted += len(view["evicted"])
    assert reasons == {str(r) for r in Reason} - {Reason.KEY_MISMATCH}
    assert statuses == {"COMMITTED", "PENDING_VALIDATION", "VALIDATED", "VALIDATION_TIMEOUT", "VALIDATION_FAILED"}
    assert evicted > 10


@pytest.mark.parametrize("name", ["rules", "decode", "big_int_scores", "bench_like"])
@pytest.mark.parametrize("indent", [None, 2])
def test_stdin_folds_to_the_same_document_with_either_engine(name: str, indent: int | None) -> None:
    """`ckptlog fold -` (lines read once): natively, or — for the big-int log, where the engine
    gives up part-way — in Python from the spooled lines plus the rest of the stream."""
    from typer.testing import CliRunner

    from processor.cli.main import _register, app

    _register()
    case = NASTY[name]
    if case.max_bytes != DEFAULT_MAX_BYTES or case.max_depth != DEFAULT_MAX_DEPTH:
        pytest.skip("the CLI flags below use the default limits")
    config = case.settings.default_config
    flags = ["--score-order", config.checkpoint_score_order]
    if config.num_to_keep is not None:
        flags += ["--default-num-to-keep", str(config.num_to_keep)]
    if config.checkpoint_score_attribute is not None:
        flags += ["--score-attribute", config.checkpoint_score_attribute]
    if case.settings.default_root is not None:
        flags += ["--storage-root", case.settings.default_root]
    if indent is not None:
        flags += ["--indent", str(indent)]
    outputs = [
        CliRunner().invoke(app, ["fold", "-", "--engine", engine, *flags], input=case.content)
        for engine in ("python", "native")
    ]
    assert outputs[0].exit_code == 0 and outputs[1].exit_code == 0
    assert outputs[1].stdout == outputs[0].stdout and json.loads(outputs[0].stdout)["runs"]


def test_stdin_fallback_refolds_the_spooled_lines_and_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine gives up on a big-int score part-way through a stream; the Python fold then
    sees every line exactly once: the spooled ones first, then the unread rest."""
    import io

    from processor import foldfile

    seen: list[bytes] = []
    real = foldfile.fold_lines

    def counting(lines: Any, *args: Any, **kwargs: Any) -> Any:
        def tap() -> Any:
            for line in lines:
                seen.append(line)
                yield line

        return real(tap(), *args, **kwargs)

    monkeypatch.setattr(foldfile, "fold_lines", counting)
    monkeypatch.setattr(native, "BATCH_LINES", 16)  # so the engine gives up with lines still unread
    head = NASTY["bench_like"].content
    content = head + NASTY["big_int_scores"].content + head.replace(b'"b', b'"z')  # more lines after the give-up
    settings_ = NASTY["big_int_scores"].settings
    text, _ = foldfile.fold_stream_text(io.BytesIO(content), settings_, engine="native")
    lines = io.BytesIO(content).readlines()
    assert len(lines) > 100 and seen == lines
    assert text == foldfile.fold_stream_text(io.BytesIO(content), settings_, engine="python")[0]
