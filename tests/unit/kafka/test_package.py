"""`processor.kafka` loads its names on first use: every exported name resolves to its home
module's object, and finding a broker (processor.kafka.discovery, used by the launcher and
`ckptlog broker`) imports no aiokafka."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import processor.kafka


@pytest.mark.parametrize("name", processor.kafka.__all__)
def test_every_exported_name_is_its_home_modules(name: str) -> None:
    home = importlib.import_module(f"processor.kafka.{processor.kafka._MODULE_OF[name]}")
    assert getattr(processor.kafka, name) is getattr(home, name)


def test_the_table_lists_exactly_the_exports() -> None:
    assert sorted(processor.kafka._MODULE_OF) == sorted(processor.kafka.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        processor.kafka.nothing  # noqa: B018


@pytest.mark.parametrize("module", ["processor.kafka.discovery", "processor.broker", "processor.cli.broker"])
def test_finding_or_launching_a_broker_imports_no_aiokafka(module: str) -> None:
    code = f"import sys, {module}; print('aiokafka' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "False"
