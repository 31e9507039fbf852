"""`ckptlog CMD` imports only the module of CMD; the table that says which one is checked here."""

from __future__ import annotations

import json
import subprocess
import sys

from processor.cli.main import COMMAND_MODULES

_REGISTERED_BY = """
import importlib, json
from processor.cli.main import COMMAND_MODULES, app
def names():
    return {c.name or c.callback.__name__ for c in app.registered_commands} | {g.name for g in app.registered_groups}
found = {}
for module in dict.fromkeys(COMMAND_MODULES.values()):
    before = names()
    importlib.import_module("processor.cli." + module)
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
from processor.cli.main import main
try:
    main()
except SystemExit as exit:
    assert exit.code == 0, exit.code
print(sorted(m for m in ("aiokafka", "processor.service.processor", "processor.demo") if m in sys.modules))
"""
    assert _python(code).strip().splitlines()[-1] == "[]"


def test_help_without_a_command_lists_every_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "processor.cli", "--help"],
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "PATH": ""},
    ).stdout
    for name in COMMAND_MODULES:
        assert name in out, name
