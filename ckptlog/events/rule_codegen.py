"""Writes what the retention table (ckptlog/events/retention_rules.py) gives, per rule field.

`python -m ckptlog.events.rule_codegen` rewrites the marked regions of models.py (the pydantic
`CheckpointConfig`), decoded.py (its Struct), view.py (`ViewConfig`), docs/contract.md (the list of
rules) and the whole of rule_types.py (the `preserved` literal, the client keyword arguments) and
ckptlog/cli/rule_flags.py (the flags, for `start-run`);
tests/unit/events/test_retention_rules.py checks that doing so changes nothing. Generated code is
plain source, so mypy types the fields and readers see them where they always were.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from ckptlog.events.retention_rules import RULE_FIELDS, RULES, RuleField

PACKAGE = Path(__file__).parent
REPO = PACKAGE.parent.parent
BEGIN = "# --- generated from ckptlog/events/retention_rules.py by python -m ckptlog.events.rule_codegen ---"
END = "# --- end of generated code ---"
DOCS_BEGIN = "<!-- generated from ckptlog/events/retention_rules.py by python -m ckptlog.events.rule_codegen -->"
DOCS_END = "<!-- end of generated list -->"
_PYTHON = {"int": "int", "float": "float", "str": "str"}


def _chunks(text: str, indent: str) -> str:
    """A string literal as implicitly concatenated pieces under 100 characters, one per line."""
    pieces = textwrap.wrap(text, 96, drop_whitespace=False, break_on_hyphens=False)
    return "\n".join(f"{indent}{_literal(piece)}" for piece in pieces)


def _literal(text: str) -> str:
    """A string literal in double quotes, as ruff format writes it (repr's quotes otherwise)."""
    plain = '"' not in text and "\\" not in text and text.isprintable()
    return f'"{text}"' if plain else repr(text)


def _pydantic(field: RuleField) -> str:
    if field.kind == "str":
        kind = "NonEmpty"
    else:
        op, bound = field.minimum or (">=", 0)
        extra = ", allow_inf_nan=False" if field.kind == "float" else ""
        kind = f"Annotated[{field.kind}, Field({'ge' if op == '>=' else 'gt'}={bound}{extra})]"
    body = _chunks(field.description, " " * 12)
    head = f"    {field.name}: {kind} | None = Field(\n        default=None,\n"
    return f"{head}        description=(\n{body}\n        ),\n    )"


def _msgspec(field: RuleField) -> str:
    if field.kind == "str":
        return f"    {field.name}: NonEmpty | None = None"
    op, bound = field.minimum or (">=", 0)
    meta = f"msgspec.Meta({'ge' if op == '>=' else 'gt'}={bound})"
    return f"    {field.name}: Annotated[{field.kind}, {meta}] | None = None"


def _view(field: RuleField) -> str:
    return f"    {field.name}: {_PYTHON[field.kind]} | SkipJsonSchema[None] = _optional()"


def _region(lines: list[str], indent: str = "    ") -> str:
    return "\n".join([f"{indent}# fmt: off", f"{indent}{BEGIN}", *lines, f"{indent}{END}", f"{indent}# fmt: on"])


def models_region() -> str:
    return _region([_pydantic(f) for f in RULE_FIELDS])


def decoded_region() -> str:
    return _region([_msgspec(f) for f in RULE_FIELDS])


def view_region() -> str:
    return _region([_view(f) for f in RULE_FIELDS])


def rule_types() -> str:
    labels = ", ".join(_literal(rule.label) for rule in RULES)
    kwargs = "\n".join(f"    {f.name}: {_PYTHON[f.kind]} | None" for f in RULE_FIELDS)
    return f'''"""Types of the retention rules beyond Ray: the VIEW's `preserved` labels, the client keywords.

Generated from ckptlog/events/retention_rules.py by `python -m ckptlog.events.rule_codegen`; do not edit.
"""

from __future__ import annotations

from typing import Literal, TypedDict

Preserved = Literal[{labels}]
"""The `preserved` label of a checkpoint a rule keeps for good (contract §3)."""


class RuleKwargs(TypedDict, total=False):
    """The rules' `checkpoint_config` fields as keyword arguments of `run_started` (None: not set)."""

{kwargs}
'''


def rule_flags() -> str:
    lines = [f"    {f.name!r}: ({f.kind!r}, {_literal(f.flag_help)})," for f in RULE_FIELDS]
    rows = "\n".join(line if len(line) <= 120 else line + "  # noqa: E501" for line in lines)
    return f'''"""The CLI flags of the retention rules beyond Ray: field name -> (type, help).

Generated from ckptlog/events/retention_rules.py by `python -m ckptlog.events.rule_codegen`; do not edit.
A copy, so `start-run --help` need not import the wire contract (ckptlog/cli/options.py `rule_options`).
"""

from __future__ import annotations

# fmt: off
RULE_FLAGS: dict[str, tuple[str, str]] = {{
{rows}
}}
'''


def contract_region() -> str:
    lines = [DOCS_BEGIN, ""]
    for rule in RULES:
        wrapped = textwrap.wrap(f"`{rule.label}`: {rule.docs}", 96)
        lines.append("- " + "\n  ".join(wrapped))
    return "\n".join([*lines, "", DOCS_END])


def splice(text: str, begin: str, end: str, region: str) -> str:
    """`text` with its lines from the one holding `begin` to the one holding `end` (with the
    `# fmt:` lines around a code region) replaced by `region`."""
    lines = text.split("\n")
    first = next(i for i, line in enumerate(lines) if begin in line)
    last = next(i for i, line in enumerate(lines) if end in line and i > first)
    if region.lstrip().startswith("# fmt: off"):
        first, last = first - 1, last + 1
    return "\n".join([*lines[:first], region, *lines[last + 1 :]])


def outputs() -> dict[Path, str]:
    """Each generated file as it should read (the current text with its regions regenerated)."""
    found = {PACKAGE / "rule_types.py": rule_types(), PACKAGE.parent / "cli" / "rule_flags.py": rule_flags()}
    for name, region in (("models.py", models_region()), ("decoded.py", decoded_region()), ("view.py", view_region())):
        path = PACKAGE / name
        found[path] = splice(path.read_text(encoding="utf-8"), BEGIN, END, region)
    contract = REPO / "docs" / "contract.md"
    if contract.exists():  # not in an installed package
        found[contract] = splice(contract.read_text(encoding="utf-8"), DOCS_BEGIN, DOCS_END, contract_region())
    return found


if __name__ == "__main__":
    for path, text in outputs().items():
        if path.read_text(encoding="utf-8") != text if path.exists() else True:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}", file=sys.stderr)
