"""A small SVG scatter chart of one metric against report index, one mark per checkpoint. Pure.

Every mark is a `<circle>` (or, with no value for the metric, a `<rect>` on the axis) with
`class="mark <marks>"` and `data-path`, `data-index`, `data-marks`, so a page (and a test) can
tell kept, best, latest, pending, preserved, evicted and deleted checkpoints apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from processor.ui.model import Point

MAX_POINTS = 2000
WIDTH, HEIGHT, PAD = 900, 320, 48
IMPORTANT = {"best", "latest", "pending", "preserved", "kept"}


def downsample(found: Sequence[Point], limit: int = MAX_POINTS) -> list[Point]:
    """At most about `limit` points: every kept/best/latest/pending/preserved one, and an even
    stride of the others."""
    if len(found) <= limit:
        return list(found)
    keep = [p for p in found if IMPORTANT.intersection(p.marks)]
    rest = [p for p in found if not IMPORTANT.intersection(p.marks)]
    room = max(1, limit - len(keep))
    stride = max(1, -(-len(rest) // room))
    chosen = keep + rest[::stride]
    return sorted(chosen, key=lambda p: (p.report_index, p.path))


def _scale(lo: float, hi: float, size: float, flip: bool) -> tuple[float, float]:
    span = hi - lo or 1.0
    factor = size / span
    return (-factor, size + lo * factor) if flip else (factor, -lo * factor)


def _attrs(p: Point) -> str:
    marks = " ".join(p.marks)
    return (
        f'class="mark {escape(marks)}" data-path="{escape(p.path)}" data-index="{p.report_index}" '
        f'data-marks="{escape(marks)}"'
    )


def _mark(p: Point, x: float, y: float | None) -> str:
    title = f"<title>#{p.report_index} {escape(p.path)} ({escape(', '.join(p.marks) or 'reported')})</title>"
    if y is None:
        return f'<rect {_attrs(p)} x="{x - 3:.1f}" y="{HEIGHT - PAD - 3:.1f}" width="6" height="6">{title}</rect>'
    radius = 6 if "best" in p.marks else 4
    return f'<circle {_attrs(p)} cx="{x:.1f}" cy="{y:.1f}" r="{radius}">{title}</circle>'


def _axes(metric: str, x_range: tuple[int, int], y_range: tuple[float, float] | None) -> str:
    left, bottom, right, top = PAD, HEIGHT - PAD, WIDTH - PAD / 2, PAD / 2
    parts = [
        f'<line class="axis" x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}"/>',
        f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{bottom}"/>',
        f'<text class="label" x="{left}" y="{HEIGHT - 12}">report {x_range[0]}</text>',
        f'<text class="label" x="{right}" y="{HEIGHT - 12}" text-anchor="end">report {x_range[1]}</text>',
        f'<text class="label" x="{left + 4}" y="{top + 12}">{escape(metric)}</text>',
    ]
    if y_range is not None:
        parts.append(f'<text class="label" x="4" y="{top + 4}">{y_range[1]:.4g}</text>')
        parts.append(f'<text class="label" x="4" y="{bottom}">{y_range[0]:.4g}</text>')
    return "".join(parts)


def chart(found: Sequence[Point], metric: str) -> str:
    """The SVG (an empty chart saying so when the run reported nothing)."""
    shown = downsample(found)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(metric)} by report index" data-points="{len(shown)}" data-reported="{len(found)}">'
    )
    if not shown:
        return head + f'<text class="label" x="{PAD}" y="{HEIGHT / 2}">no checkpoints reported</text></svg>'
    xs = [p.report_index for p in shown]
    values = [p.value for p in shown if p.value is not None]
    y_range = (min(values), max(values)) if values else None
    ax, bx = _scale(min(xs), max(xs), WIDTH - PAD * 1.5, False)
    marks = []
    for p in shown:
        x = PAD + ax * p.report_index + bx
        y = None
        if p.value is not None and y_range is not None:
            ay, by = _scale(y_range[0], y_range[1], HEIGHT - PAD * 1.5, True)
            y = PAD / 2 + ay * p.value + by
        marks.append(_mark(p, x, y))
    return head + _axes(metric, (min(xs), max(xs)), y_range) + "".join(marks) + "</svg>"
