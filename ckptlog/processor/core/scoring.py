"""Sort keys for kept checkpoints (contract §3 "Sort order"): ascending, best last.

A key is `(has_score, value, report_index)`. Missing, NaN and non-numeric scores get
`(False, -inf)` — the worst in both orders (Ray ranks a missing score best under `min`;
we deliberately do not copy that). Equal scores: the later report counts as better. Which
metric an attribute names is `ckptlog.events.metrics.lookup` (the client's tables read it the same way).
"""

from __future__ import annotations

import math
from typing import Any

from ckptlog.events.metrics import MISSING as _MISSING
from ckptlog.events.metrics import lookup

Score = int | float
"""A score as reported, signed by the order: an int compares exactly however big (contract §3). Not `float`, which
accepts an int for type checking but which the compiled fold (mypyc) turns into a double: a big int would round
or overflow."""
SortKey = tuple[bool, Score, int]


def score(metrics: dict[str, Any], attribute: str | None, order: str) -> tuple[bool, Score, str | None]:
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
