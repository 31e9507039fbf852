"""`ckptlog CMD` imports only the module of CMD; the table that says which one is checked here."""

from __future__ import annotations

import json
import subprocess
import sys

from ckptlog.cli.main import COMMAND_MODULES

_REGISTERED_BY = """
import importlib, json
from ckptlog.cli.main import COMMAND_MODULES, app
def names():
    return {c.name or c.callback.__name__ for c in app.registered_commands} | {g.name for g in app.registered_groups}
found = {}
for module in dict.fromkeys(COMMAND_MODULES.values()):
    before = names()
    importlib.import_module("ckptlog.cli." + module)
    found.update({name: module for name in names() - before})
print(json.dumps(found))
"""


def _python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout


def test_the_command_table_names_every_command_and_its_module() -> None:
    assert json.loads(_python(_REGISTERED_BY)) == COMMAND_MODULES


def test_fold_does_not_import_the_kafka_service() -> None:
    code = """
import sys
sys.argv = ["ckptlog", "fold", "--help"]
from ckptlog.cli.main import main
try:
    main()
except SystemExit as exit:
    assert exit.code == 0, exit.code
print(sorted(m for m in ("aiokafka", "ckptlog.processor.service.processor", "ckptlog.demo") if m in sys.modules))
"""
    assert _python(code).strip().splitlines()[-1] == "[]"


def test_help_without_a_command_lists_every_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ckptlog.cli", "--help"],
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "PATH": ""},
    ).stdout
    for name in COMMAND_MODULES:
        assert name in out, name


HEAVY = (
    "aiokafka",
    "fsspec",
    "rich",
    "aiohttp",
    "msgspec",
    "pydantic_settings",
    "ckptlog.events.models",  # the pydantic models of the wire contract
    "ckptlog.client",  # the client library: it imports aiokafka and the models
    "ckptlog.processor.core",
    "ckptlog.processor.service",
    "ckptlog.kafka.connection",
)
_RUN = """
import sys
heavy = sys.argv[1].split(",")
sys.argv = ["ckptlog", *sys.argv[2:]]
from ckptlog.cli.main import main
try:
    main()
except SystemExit:
    pass
print("@@" + ",".join(m for m in heavy if m in sys.modules))
"""


def _loaded(cases: list[list[str]], heavy: tuple[str, ...] = HEAVY) -> dict[str, list[str]]:
    """For each command line, the heavy modules loaded once `ckptlog WORDS` returned (a fresh process each)."""
    found = {}
    for words in cases:
        argv = [sys.executable, "-c", _RUN, ",".join(heavy), *words]
        out = subprocess.run(argv, capture_output=True, text=True).stdout
        assert "@@" in out, (words, out)
        found[" ".join(words)] = [m for m in out.rsplit("@@", 1)[1].strip().split(",") if m]
    return found


def test_help_and_argument_errors_load_none_of_the_heavy_modules() -> None:
    """Issue 38 item 8: every call took 1.2-2.2 s, --help and a bad flag too. The commands import
    aiokafka, the models, fsspec, rich and aiohttp when they run; --help and argument errors answer
    without them (typer itself needs pydantic to parse a subcommand's flags, not to list them)."""
    cases = [[name, "--help"] for name in COMMAND_MODULES]
    cases += [["report"], ["report", "r", "--no-such-flag"], ["inspect", "--limit", "x"], ["nosuchcommand"]]
    assert {words: mods for words, mods in _loaded(cases).items() if mods} == {}
    assert _loaded([["--help"], []], (*HEAVY, "pydantic")) == {"--help": [], "": []}


def test_the_evaluate_default_group_is_the_clients() -> None:
    from ckptlog.cli.evaluate import EVALUATORS_GROUP
    from ckptlog.client.evaluator import DEFAULT_GROUP

    assert EVALUATORS_GROUP == DEFAULT_GROUP
