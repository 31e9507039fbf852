"""A chart axis: "nice" tick values (1, 2, 2.5 or 5 times a power of ten, as plotting libraries
pick them), their labels, and where a value lies on the axis. Pure.

Every value is a finite float (model.number's), however large: spans that would overflow a float
(-1e308 to 1e308) are measured in halves, so no arithmetic here raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)
INTEGER_STEPS = (1.0, 2.0, 5.0, 10.0)


@dataclass(frozen=True)
class Axis:
    lo: float
    hi: float
    ticks: tuple[float, ...]
    step: float

    def place(self, value: float, start: float, end: float) -> float:
        """Where `value` lies between the pixels `start` (at `lo`) and `end` (at `hi`)."""
        half_span = self.hi / 2 - self.lo / 2
        share = (value / 2 - self.lo / 2) / half_span if half_span > 0 else 0.5
        return start + share * (end - start)

    def label(self, value: float) -> str:
        return label(value, self.step)


def _widen(lo: float, hi: float, integer: bool) -> tuple[float, float]:
    """A range with room in it: one value alone gets a margin around it."""
    if lo < hi:
        return lo, hi
    if integer:
        return max(0.0, lo - 1), lo + 1
    margin = abs(lo) / 10 or 1.0
    below, above = lo - margin, lo + margin
    return (below if math.isfinite(below) else lo), (above if math.isfinite(above) else lo)


def tight(lo: float, hi: float, integer: bool = False) -> Axis:
    """An axis from `lo` to `hi` exactly (a sparkline's: no ticks to snap to)."""
    lo, hi = _widen(lo, hi, integer)
    return Axis(lo, hi, (), 0.0)


def nice_step(span: float, count: int, integer: bool = False) -> float:
    """The smallest nice step that cuts `span` into at most about `count` parts."""
    raw = span / max(1, count)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (INTEGER_STEPS if integer else STEPS) if raw <= m * power * (1 + 1e-9))
    return max(1.0, round(step)) if integer else step


def axis(lo: float, hi: float, count: int = 6, integer: bool = False) -> Axis:
    """An axis covering [lo, hi] from the nice tick at or below `lo` to the one at or above `hi`."""
    lo, hi = _widen(lo, hi, integer)
    if not (math.isfinite(hi - lo) and (hi - lo) / max(1, count) > 0):  # beyond a float's range: the two ends
        return Axis(lo, hi, (lo, hi), math.inf)
    step = nice_step(hi - lo, count, integer)
    first, last = math.floor(lo / step), math.ceil(hi / step)
    if max(abs(first), abs(last)) > 1e12 or not math.isfinite(last * step - first * step):
        return Axis(lo, hi, (lo, hi), math.inf)  # a span at the float's precision, or beyond its range
    if _clean((first + 1) * step, step) <= lo:  # lo / step fell just short of a whole number
        first += 1
    if _clean((last - 1) * step, step) >= hi:
        last -= 1
    ticks = tuple(_clean(i * step, step) for i in range(first, last + 1))
    return Axis(min(ticks[0], lo), max(ticks[-1], hi), ticks, step)


def _clean(value: float, step: float) -> float:
    """A tick without float noise (0.30000000000000004 is 0.3)."""
    digits = _decimals(step)
    return round(value, digits) if digits is not None else value


def _decimals(step: float) -> int | None:
    """How many decimals print every multiple of `step` exactly (None: use an exponent)."""
    if not 1e-6 <= step < 1e15:
        return None
    return next((d for d in range(8) if abs(round(step, d) - step) <= step * 1e-9), None)


def label(value: float, step: float) -> str:
    """A tick's text: as many decimals as the step needs (`0.25`, `10`), an exponent for the very
    large or small (`1.5e+12`)."""
    digits = _decimals(step)
    if digits is None or abs(value) >= 1e9:
        return f"{value:.3g}"
    return f"{value:.{digits}f}"
