"""Fold throughput against Ray Train's own CheckpointManager on the same streams:
`python -m bench.ray_compare --side SIDE --keep 5|none [--reports N] [--budget S]`.

One pass over one stream (bench/workload.py: 10 runs, score `val/acc`; keep=5 with 10% of reports
validated a few reports later, keep=None without validations) times every prefix of interest
(1k, 2k, 5k … reports) at once: the time at a prefix is the time to fold a log of that many
reports, and the median cost per report over the last tenth of the prefix (ten sub-windows)
shows how the cost grows with history. Sides:

- `ckptlog`: `ckptlog.processor.foldfile.fold_lines`, what `ckptlog fold` runs (decode and fold);
- `ckptlog-apply`: the same fold (`Fold(emit=False).apply`), decoding excluded from the time;
- `ray`: Ray's manager as shipped (state written as JSON after every report), deletions off;
- `ray-bare`: Ray's in-memory bookkeeping only (no state written), deletions off.

Ray's sides time only the manager calls (building Ray's objects from the JSON is excluded:
that is work of Ray's workers), so they are the fold-only figures to set against
`ckptlog-apply`. A Ray side stops when its time budget is spent; what it reached is reported.
Each pass runs in its own process (bench/report.py): no heap left over from another.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.workload import events
from ckptlog.events.codec import decode_event
from ckptlog.events.rejections import Rejection
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.foldfile import fold_lines

SIDES = ("ckptlog", "ckptlog-apply", "ray", "ray-bare")
MARKS = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000)
REPORT_TYPE = b'"type":"ckptlog.report.v1"'
GC_FREEZE_EVERY = 65_536  # as fold_lines does, on every side: the comparison is of the managers
YIELD_EVERY = 100  # Ray's `_notify` tasks run when the loop gets control
# Where Ray writes its state: tmpfs when there is one. On this host's ext4 /tmp rewriting a file
# costs ~3.4 ms (ext4 flushes a truncated-and-rewritten file on close), which would measure the
# disk, not Ray; on tmpfs the same write takes ~9 us.
STATE_DIR = "/dev/shm" if Path("/dev/shm").is_dir() else None


@dataclass(slots=True)
class Point:
    reports: int
    seconds: float  # from the first line to the end of this prefix
    marginal_us: float  # per report, median over ten windows of the prefix's last tenth

    @property
    def rate(self) -> float:
        return self.reports / self.seconds


@dataclass(slots=True)
class Pass:
    side: str
    keep: int | None
    points: list[Point] = field(default_factory=list)
    stopped_at: int | None = None  # reports applied when the budget ran out (None: finished)
    last_us: float | None = None  # the cost per report of the last window before stopping


def stream(reports: int, keep: int | None) -> list[bytes]:
    """The benchmark's stream: bench.fold's workload for that keep."""
    return list(events(reports, keep, 0.1 if keep is not None else 0.0))


class Stamps:
    """Clock readings at the line positions where prefixes of interest (and their windows) end.
    `positions[r]` is the line index of report r: a prefix of r reports is the lines before it."""

    def __init__(self, lines: Sequence[bytes], marks: Iterable[int]) -> None:
        self.positions = [i for i, line in enumerate(lines) if REPORT_TYPE in line]
        self.total_lines, total = len(lines), len(self.positions)
        self.marks = [m for m in marks if m <= total]
        self.windows = {m: [m - m // 10 + k * (m // 100) for k in range(11)] for m in self.marks}
        due = {self.line_of(r) for rs in self.windows.values() for r in rs} | {0}
        self.due = sorted(due)
        self.at: dict[int, float] = {}

    def line_of(self, reports: int) -> int:
        return self.positions[reports] if reports < len(self.positions) else self.total_lines

    def points(self) -> list[Point]:
        """Every mark whose windows were all stamped."""
        out, start = [], self.at[0]
        for m in self.marks:
            lines = [self.line_of(r) for r in self.windows[m]]
            if not all(line in self.at for line in lines):
                break
            rs = self.windows[m]
            spans = zip(lines, lines[1:], rs, rs[1:], strict=False)
            costs = [(self.at[b] - self.at[a]) / (r1 - r0) for a, b, r0, r1 in spans]
            out.append(Point(m, self.at[lines[-1]] - start, statistics.median(costs) * 1e6))
        return out


def timed(lines: Sequence[bytes], stamps: Stamps, clock: Callable[[], float] = time.perf_counter) -> Iterator[bytes]:
    """`lines`, reading the clock before handing out each due line (after the previous one folded)."""
    due, at = iter(stamps.due), stamps.at
    nxt = next(due, -1)
    for i, line in enumerate(lines):
        if i == nxt:
            at[i] = clock()
            nxt = next(due, -1)
        yield line
    if nxt == len(lines):
        at[nxt] = clock()


class Meter:
    """A clock that runs only while a measured call does: `timed` reads it at due lines."""

    def __init__(self) -> None:
        self.spent = 0.0

    def __call__(self) -> float:
        return self.spent


def ckptlog_pass(lines: Sequence[bytes], stamps: Stamps) -> None:
    """What `ckptlog fold FILE --workers 1` runs over the lines, minus reading the file."""
    fold_lines(timed(lines, stamps))


def ckptlog_apply_pass(lines: Sequence[bytes], stamps: Stamps) -> None:
    """The same fold; the clock only runs while `Fold.apply` does."""
    fold, meter, perf = Fold(emit=False), Meter(), time.perf_counter
    gc.freeze()
    for i, event in enumerate(timed(lines, stamps, clock=meter)):
        if not i % GC_FREEZE_EVERY:
            gc.freeze()
        decoded = decode_event(event)
        if isinstance(decoded, Rejection):
            raise RuntimeError(f"line {i} rejected: {decoded.message}")
        started = perf()
        fold.apply(decoded)
        meter.spent += perf() - started


async def ray_pass(
    lines: Sequence[bytes], stamps: Stamps, persist: bool, budget_s: float, state_dir: str | None = STATE_DIR
) -> Pass:
    """Ray's managers over the lines, the clock running only inside the manager calls (and the
    event loop's turns that run their notifications); stops once `budget_s` is spent."""
    from bench.ray_driver import RayRuns  # Ray is imported only by the passes that need it

    result, meter, perf = Pass("ray" if persist else "ray-bare", None), Meter(), time.perf_counter
    with tempfile.TemporaryDirectory(dir=state_dir) as tmp, RayRuns(Path(tmp), persist=persist) as ray:
        gc.freeze()
        for i, line in enumerate(timed(lines, stamps, clock=meter)):
            if not i % GC_FREEZE_EVERY:
                gc.freeze()
            item = ray.decode(line)
            started = perf()
            if item is not None:
                ray.apply(item)
            if not i % YIELD_EVERY:
                await asyncio.sleep(0)
            meter.spent += perf() - started
            if meter.spent > budget_s:
                result.stopped_at, result.last_us = _stopped(stamps, i, meter.spent)
                return result
    return result


def _stopped(stamps: Stamps, line: int, spent: float) -> tuple[int, float | None]:
    """Reports applied up to `line`, and the cost per report since the last stamp before it."""
    reports = sum(1 for p in stamps.positions if p <= line)
    stamped = [(i, t) for i, t in stamps.at.items() if i < line]
    if not stamped:
        return reports, None
    last_line, last_t = max(stamped)
    done_then = sum(1 for p in stamps.positions if p < last_line)
    return reports, ((spent - last_t) / max(reports - done_then, 1)) * 1e6


def measure(side: str, keep: int | None, reports: int, budget_s: float, state_dir: str | None = STATE_DIR) -> Pass:
    lines = stream(reports, keep)
    stamps = Stamps(lines, [m for m in MARKS if m <= reports])
    if side == "ckptlog":
        ckptlog_pass(lines, stamps)
        result = Pass(side, keep)
    elif side == "ckptlog-apply":
        ckptlog_apply_pass(lines, stamps)
        result = Pass(side, keep)
    elif side in ("ray", "ray-bare"):
        result = asyncio.run(ray_pass(lines, stamps, side == "ray", budget_s, state_dir))
    else:
        raise ValueError(f"unknown side {side!r}")
    result.keep, result.points = keep, stamps.points()
    return result


def parse_keep(text: str) -> int | None:
    if text.lower() in ("none", "all"):
        return None
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("keep must be >= 1 or none")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--side", choices=SIDES, required=True)
    p.add_argument("--keep", type=parse_keep, default=5, help="num_to_keep, or none")
    p.add_argument("--reports", type=int, default=1_000_000)
    p.add_argument("--budget", type=float, default=300.0, help="seconds of manager time before a Ray side stops")
    p.add_argument("--ray-dir", default=STATE_DIR, help="where Ray's state is written (default: tmpfs if any)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    return p


def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(argv)
    result = measure(args.side, args.keep, args.reports, args.budget, args.ray_dir)
    if args.json:
        print(json.dumps(asdict(result)))
        return
    for point in result.points:
        print(
            f"{args.side} keep={args.keep} {point.reports:>9,} reports: {point.rate:>10,.0f} reports/s, "
            f"{point.marginal_us:8.1f} us/report at this size"
        )
    if result.stopped_at is not None:
        print(
            f"{args.side}: budget of {args.budget:.0f} s spent after {result.stopped_at:,} reports "
            f"(then {result.last_us or 0:.0f} us/report)",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
