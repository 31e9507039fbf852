"""The console's charts, drawn as SVG on the server (docs/ui.md says why). Pure.

`chart`: one metric against report index — axes with nice ticks and a grid, a line through the
reported values in report order, one mark per checkpoint. Every mark is a `<circle>` (or, with no
value for the metric, a `<rect>` on the x axis) with `class="mark <marks>"` and `data-path`,
`data-index`, `data-marks`, `data-value`: a page (and a test) tells kept, best,
latest, pending, preserved, evicted and deleted checkpoints apart, and /static/live.js shows the
one under the pointer in a tooltip. `legend` names only the marks the chart has. `sparkline`: the
runs page's small line of a run's score.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ckptlog.processor.ui.axes import Axis, axis, tight
from ckptlog.processor.ui.model import Point

MAX_POINTS = 2000
WIDTH, HEIGHT = 900, 340
LEFT, RIGHT, TOP, BOTTOM = 72, 20, 16, 48  # the plot area's margins (tick labels, axis titles)
IMPORTANT = {"best", "latest", "pending", "preserved", "kept"}
LEGEND = ("best", "latest", "kept", "pending", "preserved", "evicted", "deleted")
DRAW_ORDER = ("deleted", "evicted", "kept", "preserved", "pending", "latest", "best")  # best on top
SPARK_W, SPARK_H, SPARK_BUCKETS = 120, 26, 60


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


def status_of(p: Point) -> str:
    """The marks as the tooltip and legend say them (`reported`: the log knows nothing more yet)."""
    return ", ".join(p.marks) or "reported"


def _layer(p: Point) -> int:
    return max((DRAW_ORDER.index(m) for m in p.marks if m in DRAW_ORDER), default=-1)


def _mark(p: Point, x: float, y: float | None) -> str:
    marks = " ".join(p.marks) or "reported"
    shown = p.text
    at = y if y is not None else HEIGHT - BOTTOM
    attrs = (
        f'class="mark {escape(marks)}" data-path="{escape(p.path)}" data-index="{p.report_index}" '
        f'data-marks="{escape(status_of(p))}" data-value="{escape(shown)}"'
    )
    if y is None:
        return f'<rect {attrs} x="{x - 3:.1f}" y="{at - 3:.1f}" width="6" height="6"/>'
    radius = 6 if "best" in p.marks else 4
    return f'<circle {attrs} cx="{x:.1f}" cy="{y:.1f}" r="{radius}"/>'


def _ticks(ax: Axis, vertical: bool) -> str:
    """A grid line and a label at each tick of the x axis (`vertical` lines) or the y axis."""
    left, right, top, bottom = LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM
    parts = []
    for tick in ax.ticks:
        text = ax.label(tick)
        if vertical:
            x = ax.place(tick, left, right)
            line, at = f'x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}"', f'x="{x:.1f}" y="{bottom + 16}"'
            parts.append(f'<line class="grid" {line}/><text class="tick x" data-value="{text}" {at} ')
            parts.append(f'text-anchor="middle">{text}</text>')
        else:
            y = ax.place(tick, bottom, top)
            line, at = f'x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}"', f'x="{left - 6}" y="{y + 4:.1f}"'
            parts.append(f'<line class="grid" {line}/><text class="tick y" data-value="{text}" {at} ')
            parts.append(f'text-anchor="end">{text}</text>')
    return "".join(parts)


def _axes(xs: Axis, ys: Axis | None, metric: str) -> str:
    left, right, top, bottom = LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM
    return (
        _ticks(xs, True)
        + (_ticks(ys, False) if ys is not None else "")
        + f'<line class="axis" x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}"/>'
        + f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{bottom}"/>'
        + f'<text class="title" x="{(left + right) / 2}" y="{HEIGHT - 8}" text-anchor="middle">report index</text>'
        + f'<text class="title" transform="rotate(-90)" x="{-(top + bottom) / 2}" y="14" '
        + f'text-anchor="middle">{escape(metric)}</text>'
    )


def chart(found: Sequence[Point], metric: str) -> str:
    """The SVG (an empty chart saying so when the run reported nothing)."""
    shown = downsample(found)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(metric)} by report index" data-metric="{escape(metric)}" '
        f'data-points="{len(shown)}" data-reported="{len(found)}">'
    )
    if not shown:
        return head + f'<text class="title" x="{LEFT}" y="{HEIGHT / 2}">no checkpoints reported</text></svg>'
    xs = axis(min(p.report_index for p in shown), max(p.report_index for p in shown), 10, integer=True)
    values = [p.value for p in shown if p.value is not None]
    ys = axis(min(values), max(values)) if values else None
    placed = []
    for p in shown:
        x = xs.place(p.report_index, LEFT, WIDTH - RIGHT)
        y = ys.place(p.value, HEIGHT - BOTTOM, TOP) if ys is not None and p.value is not None else None
        placed.append((p, x, y))
    line = " ".join(f"{x:.1f},{y:.1f}" for _, x, y in placed if y is not None)
    marks = "".join(_mark(p, x, y) for p, x, y in sorted(placed, key=lambda t: _layer(t[0])))
    return f'{head}{_axes(xs, ys, metric)}<polyline class="line" points="{line}"/>{marks}</svg>'


def legend(found: Sequence[Point]) -> str:
    """A key for each mark the chart shows, and only those."""
    shown = downsample(found)
    present = {m for p in shown for m in p.marks}
    keys = [m for m in LEGEND if m in present]
    if any(not p.marks for p in shown):
        keys.append("reported")
    if any(p.value is None for p in shown):
        keys.append("no value")
    spans = "".join(f'<span class="key {escape(k.replace(" ", "-"))}">{escape(k)}</span>' for k in keys)
    return f'<p class="legend">{spans}</p>'


def _thin(found: list[Point], buckets: int = SPARK_BUCKETS) -> list[Point]:
    """About 2 × `buckets` points with the line's shape: each bucket's lowest and highest."""
    if len(found) <= 2 * buckets:
        return found
    size = -(-len(found) // buckets)
    kept: list[Point] = []
    for start in range(0, len(found), size):
        chunk = found[start : start + size]
        ends = {min(chunk, key=lambda p: p.value or 0.0).path, max(chunk, key=lambda p: p.value or 0.0).path}
        kept.extend(p for p in chunk if p.path in ends)
    return kept


def sparkline(found: Sequence[Point], metric: str | None) -> str:
    """A run's metric over its reports, the best and latest checkpoints dotted (an empty one when
    the run has no value of it)."""
    valued = [p for p in found if p.value is not None]
    label = f"{metric or 'no metric'} over {len(valued)} reports"
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="spark" viewBox="0 0 {SPARK_W} {SPARK_H}" '
        f'width="{SPARK_W}" height="{SPARK_H}" role="img" aria-label="{escape(label)}" data-points="{len(valued)}">'
    )
    if not valued:
        return head + "</svg>"
    xs = tight(valued[0].report_index, valued[-1].report_index, integer=True)
    ys = tight(min(p.value or 0.0 for p in valued), max(p.value or 0.0 for p in valued))

    def at(p: Point) -> str:
        return f"{xs.place(p.report_index, 4, SPARK_W - 4):.1f},{ys.place(p.value or 0.0, SPARK_H - 4, 4):.1f}"

    dots = []
    for mark in ("latest", "best"):
        p = next((p for p in valued if mark in p.marks), None)
        if p is not None:
            x, y = at(p).split(",")
            dots.append(f'<circle class="{mark}" cx="{x}" cy="{y}" r="2.5"/>')
    points = " ".join(at(p) for p in _thin(valued))
    return f'{head}<polyline class="line" points="{points}"/>{"".join(dots)}</svg>'
