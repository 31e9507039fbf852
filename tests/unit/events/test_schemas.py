"""schemas/ is generated from the models; a drift fails here (run `python -m events.schema`)."""

from __future__ import annotations

import json

from events.schema import SCHEMAS, documents, main
from processor.core import Fold, run_view
from tests import factories as f


def test_committed_schemas_match_the_code() -> None:
    assert main(["--check"]) == 0


def test_view_schema_lists_exactly_the_view_fields() -> None:
    fold = Fold()
    fold.apply(f.event(f.started()))
    view = run_view(fold.runs["r"])
    schema = json.loads((SCHEMAS / "view.schema.json").read_text())
    assert set(schema["required"]) == set(view)


def test_every_input_type_has_a_schema() -> None:
    names = {k for k in documents() if k.startswith("input/")}
    assert len(names) == 5
