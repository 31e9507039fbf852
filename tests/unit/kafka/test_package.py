"""`ckptlog.kafka` loads its names on first use: every exported name resolves to its home
module's object, and finding a broker (ckptlog.kafka.discovery, used by the launcher and
`ckptlog broker`) imports no aiokafka."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import ckptlog.kafka


@pytest.mark.parametrize("name", ckptlog.kafka.__all__)
def test_every_exported_name_is_its_home_modules(name: str) -> None:
    home = importlib.import_module(f"ckptlog.kafka.{ckptlog.kafka._MODULE_OF[name]}")
    assert getattr(ckptlog.kafka, name) is getattr(home, name)


def test_the_table_lists_exactly_the_exports() -> None:
    assert sorted(ckptlog.kafka._MODULE_OF) == sorted(ckptlog.kafka.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        ckptlog.kafka.nothing  # noqa: B018


@pytest.mark.parametrize("module", ["ckptlog.kafka.discovery", "ckptlog.broker", "ckptlog.cli.broker"])
def test_finding_or_launching_a_broker_imports_no_aiokafka(module: str) -> None:
    code = f"import sys, {module}; print('aiokafka' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "False"
