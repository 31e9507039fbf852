"""schemas/ is generated from the models; a drift fails here (run `python -m ckptlog.events.schema`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ckptlog.events import schema as schema_module
from ckptlog.events.schema import SCHEMAS, documents, main
from ckptlog.processor.core import Fold, run_view
from tests import factories as f


def test_committed_schemas_match_the_code() -> None:
    assert main(["--check"]) == 0


def test_the_check_command_passes() -> None:
    """What CI runs: `python -m ckptlog.events.schema --check`."""
    checked = subprocess.run([sys.executable, "-m", "ckptlog.events.schema", "--check"], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_the_check_fails_when_a_schema_drifts_from_the_models(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "schemas"
    shutil.copytree(SCHEMAS, copy)
    drifted = json.loads((copy / "input-event.schema.json").read_text())
    drifted["$defs"]["ReportData"]["properties"].pop("generation")  # as if the model had grown a field
    (copy / "input-event.schema.json").write_text(json.dumps(drifted))
    monkeypatch.setattr(schema_module, "SCHEMAS", copy)
    assert main(["--check"]) == 1
    assert "input-event.schema.json" in capsys.readouterr().err


def test_view_schema_lists_exactly_the_view_fields() -> None:
    fold = Fold()
    fold.apply(f.event(f.started()))
    view = run_view(fold.runs["r"])
    schema = json.loads((SCHEMAS / "view.schema.json").read_text())
    # checkpoint_config is always there, but optional: VIEWs of processors before it lack it
    assert set(schema["required"]) == set(view) - {"checkpoint_config"}
    assert set(view) <= set(schema["properties"])


def test_every_input_type_has_a_schema() -> None:
    from ckptlog.events.decoded import INPUT_KINDS

    names = {k for k in documents() if k.startswith("input/")}
    assert len(names) == len(INPUT_KINDS) == 9
