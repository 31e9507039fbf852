"""How every reader shows a metric's number: as text, and as a float a chart can place.

A topic may hold any JSON number, and the fold compares scores exactly however large (contract §3):
`{"acc": 10**400}` is a valid score. Python's `float()`, `math.isfinite` and `format(x, "g")` raise
`OverflowError` on such an int, so no reader formats or converts a score itself: the console (its
tables, charts and checkpoint pages), `ckptlog explain`, `history`, `inspect`, `watch` and the
client's tables all go through `number_text` and `plotted`. Pure.
"""

from __future__ import annotations

import sys
from decimal import Decimal
from typing import Any

_EXACT_DIGITS = 16  # an int with at most this many digits is shown whole (a step, a count)
_FLOAT_MAX = sys.float_info.max


def is_number(value: Any) -> bool:
    """An int or a float (bools are not numbers here, as the fold reads them: contract §3)."""
    return type(value) is int or type(value) is float


def comparable(value: Any) -> int | float | None:
    """A metric as an exact number to sort by: an int (any size) or a finite float; None for
    anything else (a string, a bool, NaN, ±inf)."""
    if type(value) is int:
        return value
    if type(value) is float and value - value == 0.0:  # finite: inf - inf and NaN - NaN are NaN
        return value
    return None


def plotted(value: Any) -> float | None:
    """A metric as a finite float a chart can place: an int beyond a float's range is clamped to
    ±`sys.float_info.max` (its mark shows `number_text` of the exact value); None for anything
    `comparable` refuses."""
    exact = comparable(value)
    if type(exact) is int and abs(exact) > _FLOAT_MAX:  # int vs float compares exactly, no overflow
        return _FLOAT_MAX if exact > 0 else -_FLOAT_MAX
    return None if exact is None else float(exact)


def number_text(value: int | float, digits: int = 6) -> str:
    """A number as a reader shows it: a float with `digits` significant digits (`nan`, `inf`), an
    int whole up to 16 digits, a larger one in the same `1.5e+400` form (exact digits, rounded)."""
    if type(value) is float:
        return f"{value:.{digits}g}"
    if abs(value) < 10**_EXACT_DIGITS:
        return str(int(value))
    mantissa, _, exponent = f"{Decimal(value):.{max(0, digits - 1)}e}".partition(
        "e"
    )  # Decimal: no overflow, no digit limit
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{exponent}"
