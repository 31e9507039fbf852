"""Import rules: the fold is pure; aiokafka only in processor/kafka; fsspec only in processor/storage;
the client library (ckptlog/) depends on events/, the Kafka adapter and the error module, nothing
else of the server."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = [p for pkg in ("processor", "events", "ckptlog") for p in (REPO / pkg).rglob("*.py")]
FIRST_PARTY = frozenset({"processor", "events", "ckptlog", "bench", "tests", "examples"})
CLIENT_MAY_IMPORT = ("ckptlog", "events", "processor.kafka", "processor.errors")
"""What ckptlog/ may import of this repository (each with its submodules): itself, the wire contract,
the Kafka adapter (connections, clients' I/O, finding a broker) and the one exception root."""
SHARED = ("events", "processor.kafka", "processor.errors")
"""What the server modules the client imports may import themselves: the client's whole closure."""


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def imported_modules(source: str, filename: str = "<source>") -> set[str]:
    """Dotted names of the absolute imports in `source`: `from a.b import c` gives `a.b.c` (c may be a
    submodule: `from processor import foldfile`), `import a.b` gives `a.b`. TYPE_CHECKING blocks and
    imports inside functions count too."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def outside(names: set[str], allowed: tuple[str, ...]) -> list[str]:
    """The first-party names in `names` that are none of `allowed` nor below one of them."""
    return sorted(
        name
        for name in names
        if name.split(".")[0] in FIRST_PARTY and not any(name == a or name.startswith(a + ".") for a in allowed)
    )


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


CLIENT = [p for p in SOURCES if rel(p).startswith("ckptlog/")]
SHARED_SOURCES = [p for p in SOURCES if rel(p).startswith(("events/", "processor/kafka/"))]
SHARED_SOURCES += [REPO / "processor/errors.py", REPO / "processor/__init__.py"]


@pytest.mark.parametrize("path", CLIENT, ids=rel)
def test_the_client_imports_only_events_the_kafka_adapter_and_the_error_module(path: Path) -> None:
    """Issue 26 item 5: the client library must not pull in the server (the fold, the service, the
    broker launcher, the demo); what both sides need lives in events/ or the Kafka adapter."""
    found = outside(imported_modules(path.read_text(), str(path)), CLIENT_MAY_IMPORT)
    assert found == [], f"{rel(path)} imports {found}: the client may import only {CLIENT_MAY_IMPORT}"


@pytest.mark.parametrize("path", SHARED_SOURCES, ids=rel)
def test_what_the_client_imports_imports_nothing_else_of_the_server(path: Path) -> None:
    """events/, processor/kafka/ and processor/errors.py stay closed: the client's rule holds for
    everything it loads, not only its own files (and none of them imports the client back)."""
    found = outside(imported_modules(path.read_text(), str(path)), SHARED)
    assert found == [], f"{rel(path)} imports {found}: the client loads this module, so it may import only {SHARED}"


@pytest.mark.parametrize(
    "line",
    [  # what ckptlog/ imported before issue 26 item 5, and the other spellings of such an import
        "from processor.broker import ensure_bootstrap",
        "from processor.broker import find_bootstrap",
        "from processor.core.paths import is_within",
        "from processor.core.rejections import validation_without_checkpoint",
        "from processor.core.scoring import lookup",
        "from processor.core.state import FoldSettings",
        "from processor.foldfile import FoldResult, fold_lines",
        "from processor.service.processor import Processor",
        "from processor.service.settings import ServiceSettings",
        "import processor.service.processor",
        "from processor import foldfile",
        "from processor import errors, foldfile",
        "import processor",
        "from tests import factories",
        "if TYPE_CHECKING:\n    from processor.service.settings import ServiceSettings",
        "def later() -> None:\n    from processor.broker import LocalBroker",
    ],
)
def test_the_client_rule_catches_a_server_import(line: str) -> None:
    assert outside(imported_modules(line), CLIENT_MAY_IMPORT) != []


@pytest.mark.parametrize(
    "line",
    [
        "from processor.errors import CkptlogError, ConfigError",
        "from processor import errors",
        "from processor.kafka.connection import KafkaConnection",
        "from processor.kafka import KafkaConnection",
        "from processor.kafka.discovery import find_bootstrap",
        "from events.codec import decode_event",
        "from ckptlog.errors import ClientError",
        "from . import ids",
        "import aiokafka",
        "from ray.train import RunConfig",
    ],
)
def test_the_client_rule_lets_the_shared_modules_through(line: str) -> None:
    assert outside(imported_modules(line), CLIENT_MAY_IMPORT) == []


def test_importing_every_client_module_loads_no_server_module() -> None:
    """The same rule at run time, for what no import line shows (an import in a shared module's
    function, importlib): every module of ckptlog/ imported, then sys.modules looked at."""
    code = """
import importlib, pkgutil, sys
import ckptlog
for module in pkgutil.walk_packages(ckptlog.__path__, "ckptlog."):
    importlib.import_module(module.name)
print("\\n".join(sorted(sys.modules)))
"""
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True, text=True)
    names = set(loaded.stdout.split())
    assert "ckptlog.sync_clients" in names and "processor.kafka.discovery" in names
    assert outside(names - {"processor"}, CLIENT_MAY_IMPORT) == []  # the bare package: its __init__ is checked above


def test_sources_were_found() -> None:
    assert len(SOURCES) > 10
    assert len(CLIENT) > 10 and len(SHARED_SOURCES) > 20
