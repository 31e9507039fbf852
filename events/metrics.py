"""How a score attribute names a metric (contract §3): `val/acc` finds `{"val": {"acc": …}}` as
well as a literal `"val/acc"` key.

Part of the contract, so the fold's scores (processor.core.scoring, retention) and the client's
tables (`ckptlog watch`, the demo) read a metric the same way.
"""

from __future__ import annotations

from functools import reduce
from operator import getitem
from typing import Any

MISSING = _MISSING = object()  # what `lookup` returns for an absent attribute
_PARTS: dict[str, tuple[str, ...]] = {}  # "val/acc" -> ("val", "acc"): split once per attribute name


def lookup(metrics: dict[str, Any], attribute: str) -> Any:
    """`metrics` flattened with `/` then indexed by `attribute`; `MISSING` if absent."""
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
