"""Sort keys for kept checkpoints (contract §3 "Sort order"): ascending, best last.

A key is `(has_score, value, report_index)`. Missing, NaN and non-numeric scores get
`(False, -inf)` — the worst in both orders (Ray ranks a missing score best under `min`;
we deliberately do not copy that). Equal scores: the later report counts as better.
"""

from __future__ import annotations

import math
from functools import reduce
from operator import getitem
from typing import Any

SortKey = tuple[bool, float, int]
MISSING = _MISSING = object()  # what `lookup` returns for an absent attribute
_PARTS: dict[str, tuple[str, ...]] = {}  # "val/acc" -> ("val", "acc"): split once per attribute name


def lookup(metrics: dict[str, Any], attribute: str) -> Any:
    """`metrics` flattened with `/` then indexed by `attribute`; `_MISSING` if absent."""
    value = metrics.get(attribute, _MISSING)
    if value is not _MISSING and not isinstance(value, dict):
        return value
    parts = _PARTS.get(attribute)
    if parts is None:
        if "/" not in attribute:
            return _MISSING
        parts = _PARTS[attribute] = tuple(attribute.split("/"))
    try:  # JSON values other than dicts raise TypeError when indexed by a str
        node = reduce(getitem, parts, metrics)  # the walk down, in C
    except (KeyError, TypeError):
        return _flat_lookup(metrics, attribute)
    return _MISSING if isinstance(node, dict) else node


def _flat_lookup(metrics: dict[str, Any], attribute: str, prefix: str = "") -> Any:
    """Slow path for keys that themselves contain `/`: walk every flattened key."""
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            found = _flat_lookup(value, attribute, name + "/") if attribute.startswith(name + "/") else _MISSING
            if found is not _MISSING:
                return found
        elif name == attribute:
            return value
    return _MISSING


def score(metrics: dict[str, Any], attribute: str | None, order: str) -> tuple[bool, float, str | None]:
    """(has_score, signed value, problem) where problem names why a score ranks last."""
    if attribute is None:
        return False, -math.inf, None
    value = lookup(metrics, attribute)
    kind = type(value)
    if kind is not float and kind is not int:  # exact types first: the common case in two checks
        if value is _MISSING:
            return False, -math.inf, "score_missing"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, -math.inf, "score_not_numeric"
    if value != value:
        return False, -math.inf, "score_nan"
    return True, (value if order == "max" else -value), None
