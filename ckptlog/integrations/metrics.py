"""A framework's metrics as a report's JSON values: what every trainer integration hands to ckptlog.

Frameworks log tensors (torch, JAX, Keras backends) and numpy scalars; a report carries JSON. A
one-element tensor or array becomes its number (`.item()`), a mapping is converted key by key, and a
value that is no number, string or mapping (a multi-element tensor, an object) is left out: a
checkpoint's metrics are for ranking and reading, not a dump of the training state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

JSON_SCALARS = (bool, int, float, str)


def plain(value: Any) -> Any:
    """`value` as a JSON value, or None when it has none (see the module docstring)."""
    if value is None or isinstance(value, JSON_SCALARS):
        return value
    if isinstance(value, Mapping):
        return plain_metrics(value)
    elements = value.numel() if hasattr(value, "numel") else getattr(value, "size", None)  # torch / numpy, JAX
    if elements == 1 and hasattr(value, "item"):
        item = value.item()
        return item if isinstance(item, JSON_SCALARS) else None
    return None


def plain_metrics(metrics: Mapping[Any, Any]) -> dict[str, Any]:
    """Every entry of `metrics` that has a JSON value (keys as strings), in order."""
    converted = ((str(key), plain(value)) for key, value in metrics.items())
    return {key: value for key, value in converted if value is not None}
