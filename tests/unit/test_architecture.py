"""Import rules: the fold is pure; aiokafka only in ckptlog/kafka; fsspec only in ckptlog/processor/storage;
the client library (ckptlog/client, ckptlog/integrations and the package's public names) depends on the wire
contract (ckptlog/events), the Kafka adapter (ckptlog/kafka) and the one exception root (ckptlog/errors.py),
nothing else of the server (docs/architecture.md, "One namespace")."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import ckptlog

REPO = Path(__file__).resolve().parents[2]
SOURCES = list((REPO / "ckptlog").rglob("*.py"))
FIRST_PARTY = frozenset({"ckptlog", "processor", "events", "bench", "tests", "examples"})
PUBLIC = frozenset(f"ckptlog.{name}" for name in ckptlog.__all__)
"""`from ckptlog import Reporter`: the package's public names, re-exported from ckptlog.client."""
CLIENT_MAY_IMPORT = (
    "ckptlog.client",
    "ckptlog.integrations",
    "ckptlog.events",
    "ckptlog.kafka",
    "ckptlog.errors",
    "ckptlog.compiled",
)
"""What the client library may import of this repository (each with its submodules): itself, the wire
contract, the Kafka adapter (connections, clients' I/O, finding a broker), the one exception root, and the
package's choice of compiled fold or sources (made at `import ckptlog`, before anything else)."""
FRAMEWORKS = frozenset(
    {"ray", "ray_adopt", "ray_session", "ray_snapshot", "lightning", "transformers", "torch", "keras", "orbax"}
)
"""Integration modules that import their framework at import time."""
SHARED = ("ckptlog.events", "ckptlog.kafka", "ckptlog.errors")
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
    """The first-party names in `names` that are none of `allowed` nor below one of them (the package's
    public names count as ckptlog.client, where they live)."""
    public = "ckptlog.client" in allowed
    return sorted(
        name
        for name in names
        if name.split(".")[0] in FIRST_PARTY
        and not (public and name in PUBLIC)
        and not any(name == a or name.startswith(a + ".") for a in allowed)
    )


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@pytest.mark.parametrize(
    "path", [p for p in SOURCES if rel(p).startswith(("ckptlog/processor/core/", "ckptlog/events/"))], ids=rel
)
def test_core_and_events_import_no_io(path: Path) -> None:
    forbidden = {"aiokafka", "fsspec", "asyncio", "s3fs", "time", "random", "datetime_now", "socket", "os"}
    assert not imported(path) & forbidden, f"{rel(path)} imports {imported(path) & forbidden}"


@pytest.mark.parametrize("path", SOURCES, ids=rel)
def test_only_adapters_import_io_libraries(path: Path) -> None:
    names = imported(path)
    if "aiokafka" in names:
        assert rel(path).startswith("ckptlog/kafka/"), f"{rel(path)} imports aiokafka"
    if names & {"fsspec", "s3fs"}:
        assert rel(path).startswith("ckptlog/processor/storage/"), f"{rel(path)} imports fsspec"


def test_fold_has_no_clock_or_randomness() -> None:
    for path in (REPO / "ckptlog/processor/core").rglob("*.py"):
        text = path.read_text()
        for needle in ("time.time(", "datetime.now(", "random.", "uuid4("):
            assert needle not in text, f"{rel(path)} uses {needle}"


CLIENT = [p for p in SOURCES if rel(p).startswith(("ckptlog/client/", "ckptlog/integrations/"))]
CLIENT += [REPO / "ckptlog/__init__.py"]
SHARED_SOURCES = [p for p in SOURCES if rel(p).startswith(("ckptlog/events/", "ckptlog/kafka/"))]
SHARED_SOURCES += [REPO / "ckptlog/errors.py"]


@pytest.mark.parametrize("path", CLIENT, ids=rel)
def test_the_client_imports_only_events_the_kafka_adapter_and_the_error_module(path: Path) -> None:
    """Issue 26 item 5: the client library must not pull in the server (the fold, the service, the
    broker launcher, the demo); what both sides need lives in ckptlog/events/ or the Kafka adapter."""
    found = outside(imported_modules(path.read_text(), str(path)), CLIENT_MAY_IMPORT)
    assert found == [], f"{rel(path)} imports {found}: the client may import only {CLIENT_MAY_IMPORT}"


@pytest.mark.parametrize("path", SHARED_SOURCES, ids=rel)
def test_what_the_client_imports_imports_nothing_else_of_the_server(path: Path) -> None:
    """ckptlog/events/, ckptlog/kafka/ and ckptlog/errors.py stay closed: the client's rule holds for
    everything it loads, not only its own files (and none of them imports the client back)."""
    found = outside(imported_modules(path.read_text(), str(path)), SHARED)
    assert found == [], f"{rel(path)} imports {found}: the client loads this module, so it may import only {SHARED}"


@pytest.mark.parametrize(
    "line",
    [  # what ckptlog/ imported before issue 26 item 5, and the other spellings of such an import
        "from ckptlog.broker import ensure_bootstrap",
        "from ckptlog.broker import find_bootstrap",
        "from ckptlog.processor.core.paths import is_within",
        "from ckptlog.processor.core.rejections import validation_without_checkpoint",
        "from ckptlog.processor.core.scoring import lookup",
        "from ckptlog.processor.core.state import FoldSettings",
        "from ckptlog.processor.foldfile import FoldResult, fold_lines",
        "from ckptlog.processor.service.processor import Processor",
        "from ckptlog.processor.service.settings import ServiceSettings",
        "import ckptlog.processor.service.processor",
        "from ckptlog.processor import foldfile",
        "from ckptlog import processor",
        "import ckptlog.cli.main",
        "from ckptlog.demo import runner",
        "import processor",
        "from events.codec import decode_event",
        "from tests import factories",
        "if TYPE_CHECKING:\n    from ckptlog.processor.service.settings import ServiceSettings",
        "def later() -> None:\n    from ckptlog.broker import LocalBroker",
    ],
)
def test_the_client_rule_catches_a_server_import(line: str) -> None:
    assert outside(imported_modules(line), CLIENT_MAY_IMPORT) != []


@pytest.mark.parametrize(
    "line",
    [
        "from ckptlog.errors import CkptlogError, ConfigError",
        "from ckptlog import errors",
        "from ckptlog import Reporter, AsyncReader",
        "from ckptlog.kafka.connection import KafkaConnection",
        "from ckptlog.kafka import KafkaConnection",
        "from ckptlog.kafka.discovery import find_bootstrap",
        "from ckptlog.events.codec import decode_event",
        "from ckptlog.client.errors import ClientError",
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
import ckptlog, ckptlog.client, ckptlog.integrations
for package in (ckptlog.client, ckptlog.integrations):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if module.name.startswith("ckptlog.integrations.") and module.name.rsplit(".", 1)[1] in FRAMEWORKS:
            continue  # each needs its framework installed; its import lines are checked above
        importlib.import_module(module.name)
print("\\n".join(sorted(sys.modules)))
"""
    code = f"FRAMEWORKS = {sorted(FRAMEWORKS)!r}\n" + code
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True, text=True)
    names = set(loaded.stdout.split())
    assert "ckptlog.client.sync_clients" in names and "ckptlog.kafka.discovery" in names
    assert outside(names - {"ckptlog"}, CLIENT_MAY_IMPORT) == []  # the bare package: its __init__ is checked above


def test_no_module_is_left_outside_the_namespace() -> None:
    """One import name (issue 40 item 2): the old top-level packages are gone, and no source imports them."""
    assert not (REPO / "processor").exists() and not (REPO / "events").exists()
    stale = {rel(p): found for p in SOURCES if (found := imported(p) & {"processor", "events"})}
    assert stale == {}


def test_sources_were_found() -> None:
    assert len(SOURCES) > 10
    assert len(CLIENT) > 10 and len(SHARED_SOURCES) > 20
