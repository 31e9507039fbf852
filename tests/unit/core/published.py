"""Every output against what is published about it: its row in the output table (ckptlog/events/outputs.py),
the JSON Schema of its `data` in schemas/output/ and the model that schema is generated from.

The schemas are what consumers in other languages validate against, so an output the fold builds
with a missing, mistyped or undeclared field is a broken contract even when no Python reader
notices (the models allow extra keys, for readers of newer processors; the fold must not rely on
that). The property tests (test_fold_properties.py) and the corpus test pass every output here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator

from ckptlog.events.envelope import encode_json
from ckptlog.events.outputs import OUTPUTS
from ckptlog.events.schema import SCHEMAS, output_file


@cache
def validator(name: str) -> Draft202012Validator:
    """The validator of the committed schema file of output `name` (not a regenerated one)."""
    kind = OUTPUTS[name]
    return Draft202012Validator(json.loads((SCHEMAS / output_file(kind.name, kind.version)).read_text()))


def problems(name: str, data: dict[str, Any]) -> list[str]:
    """Why output `name` with `data` is not what the table, schema and model publish (empty: it is)."""
    kind = OUTPUTS.get(name)
    if kind is None:
        return [f"{name!r} has no row in the output table (ckptlog/events/outputs.py OUTPUT_KINDS)"]
    wire = json.loads(encode_json(data))  # as published (NaN/Infinity literals read back as floats)
    found = [f"{name}: {error.message} at {list(error.absolute_path)}" for error in validator(name).iter_errors(wire)]
    undeclared = set(wire) - set(kind.model.model_fields)
    if undeclared:
        found.append(f"{name}: {sorted(undeclared)} not declared by {kind.model.__name__} (nor its schema)")
    if not found:
        kind.model.model_validate(wire)  # raises if the model disagrees with its own schema
    return found


def check(outputs: Iterable[tuple[str, dict[str, Any]]]) -> None:
    """Assert every `(name, data)` output is as published."""
    for name, data in outputs:
        found = problems(name, data)
        assert not found, found
