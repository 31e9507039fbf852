"""Import rules: the fold is pure; aiokafka only in processor/kafka; fsspec only in processor/storage."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = [p for pkg in ("processor", "events", "ckptlog") for p in (REPO / pkg).rglob("*.py")]


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@pytest.mark.parametrize("path", [p for p in SOURCES if rel(p).startswith(("processor/core/", "events/"))], ids=rel)
def test_core_and_events_import_no_io(path: Path) -> None:
    forbidden = {"aiokafka", "fsspec", "asyncio", "s3fs", "time", "random", "datetime_now", "socket", "os"}
    assert not imported(path) & forbidden, f"{rel(path)} imports {imported(path) & forbidden}"


@pytest.mark.parametrize("path", SOURCES, ids=rel)
def test_only_adapters_import_io_libraries(path: Path) -> None:
    names = imported(path)
    if "aiokafka" in names:
        assert rel(path).startswith("processor/kafka/"), f"{rel(path)} imports aiokafka"
    if names & {"fsspec", "s3fs"}:
        assert rel(path).startswith("processor/storage/"), f"{rel(path)} imports fsspec"


def test_fold_has_no_clock_or_randomness() -> None:
    for path in (REPO / "processor/core").rglob("*.py"):
        text = path.read_text()
        for needle in ("time.time(", "datetime.now(", "random.", "uuid4("):
            assert needle not in text, f"{rel(path)} uses {needle}"


def test_sources_were_found() -> None:
    assert len(SOURCES) > 10
