"""How a score attribute names a metric (contract §3): `val/acc` finds `{"val": {"acc": …}}` as
well as a literal `"val/acc"` key.

Part of the contract, so the fold's scores (ckptlog.processor.core.scoring, retention), the client's
tables (`ckptlog watch`, the demo) and the web console (`ckptlog ui`: its score columns, chart and
metric menu, through `flatten`) read a metric the same way.
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


def flatten(metrics: dict[str, Any]) -> dict[str, Any]:
    """Every attribute `lookup` finds a value for, with that value, in the metrics' key order:
    `{"eval": {"acc": 0.7}, "loss": 2}` -> `{"eval/acc": 0.7, "loss": 2}` (never a dict)."""
    if not any(isinstance(value, dict) for value in metrics.values()):
        return dict(metrics)  # flat already: each key is its own attribute (lookup's first test)
    found: dict[str, Any] = {}
    for name in _names(metrics, ""):
        if name not in found:
            value = lookup(metrics, name)
            if value is not _MISSING:  # an ambiguous spelling lookup reads as absent: as the fold does
                found[name] = value
    return found


def _names(metrics: dict[str, Any], prefix: str) -> list[str]:
    names: list[str] = []
    for key, value in metrics.items():
        if isinstance(value, dict):
            names.extend(_names(value, f"{prefix}{key}/"))
        else:
            names.append(f"{prefix}{key}")
    return names
