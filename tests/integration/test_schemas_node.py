"""A non-Python producer: Node.js with ajv (examples/node, shown in docs/schemas.md) decides every
case of the schema corpus (tests/unit/events/test_input_schema.py) exactly as the processor does.

Installs what it needs itself (`npm ci` of examples/node into a temporary copy); skipped only
where node is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.events.test_input_schema import accepted_by_processor, cases

REPO = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None, reason="node is not installed"),
    pytest.mark.timeout(300),
]


def test_node_producer_validates_exactly_what_the_processor_accepts(tmp_path: Path) -> None:
    example = tmp_path / "node"
    shutil.copytree(REPO / "examples/node", example, ignore=shutil.ignore_patterns("node_modules"))
    installed = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=example, capture_output=True, text=True
    )
    assert installed.returncode == 0, installed.stderr
    corpus = list(cases())
    lines = "".join(json.dumps(doc) + "\n" for doc in corpus)
    schema = REPO / "schemas/input-event.schema.json"
    ran = subprocess.run(
        ["node", "validate.mjs"],
        cwd=example,
        input=lines,
        capture_output=True,
        text=True,
        env={**os.environ, "INPUT_EVENT_SCHEMA": str(schema)},
    )
    verdicts = ran.stdout.splitlines()
    assert len(verdicts) == len(corpus), ran.stderr
    disagree = [
        (verdict, json.dumps(doc)[:200])
        for doc, verdict in zip(corpus, verdicts, strict=True)
        if (verdict == "ok") != accepted_by_processor(doc)
    ]
    assert not disagree, f"{len(disagree)} of {len(corpus)} disagree, e.g. {disagree[:5]}"
    assert ran.returncode == 1 and verdicts.count("ok") > 100  # some invalid (exit 1), many valid
