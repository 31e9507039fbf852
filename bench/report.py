"""The benchmarks report: `python -m bench.report [--sections ...] [--quick]`.

Runs the measurements of issue 16 (fold vs Ray Train's CheckpointManager, the processor end to
end against a bare aiokafka loop, latency against rate, recovery against history and snapshot
interval, 4 partitions with 1 and 2 processes, memory of 10,000 runs) and of issue 39 (the
processor against a Quix Streams peer doing the same job), keeps every figure in a
JSON results file (one record per section: when, which commit, the command), draws the plots
(matplotlib, Agg) and regenerates the one generated section of docs/benchmarks.md, between
`<!-- bench.report:begin -->` and `<!-- bench.report:end -->`; nothing outside it is touched.

Sections not measured in a run keep their last recorded figures (and their own date and
commit), so one section can be re-measured alone. `--render-only` redraws from the results file.
`--quick` is a smoke run of a few minutes with small sizes; it writes to a temporary directory
unless `--out` says otherwise, so its figures never land in the docs by accident.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("ray", "e2e", "peer", "latency", "recovery", "partitions", "memory")
RAY_SIDES = ("ckptlog", "ckptlog-apply", "ray-bare", "ray", "ckptlog-apply")  # the fold measured again last: drift
FULL = {
    "ray_reports": 1_000_000,
    "ray_budget": 300.0,
    "events": 100_000,
    "repeats": 3,
    "rates": [250, 500, 1000, 2000],
    "seconds": 20.0,
    "history": [10_000, 100_000, 1_000_000],
    "intervals": [1_000, 10_000, 100_000],
    "interval_history": 100_000,
    "scale_events": 100_000,
    "runs": 10_000,
    "window_reports": 5_000,
}
QUICK = FULL | {
    "ray_reports": 20_000,
    "ray_budget": 15.0,
    "events": 60_000,  # bench.processor does not time the first committed batch: fewer can leave nothing timed
    "repeats": 1,
    "rates": [500, 1000],
    "seconds": 5.0,
    "history": [10_000, 30_000],
    "intervals": [1_000, 10_000],
    "interval_history": 20_000,
    "scale_events": 20_000,
    "runs": 500,
    "window_reports": 4_500,
}
FLAGS = {  # which options each section's command repeats
    "ray": ("ray_reports", "ray_budget"),
    "e2e": ("events", "repeats"),
    "peer": ("events", "repeats"),
    "latency": ("rates", "seconds"),
    "recovery": ("history", "intervals", "interval_history"),
    "partitions": ("scale_events", "repeats"),
    "memory": ("runs", "window_reports"),
}


def ints(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x]


def sections(text: str) -> list[str]:
    chosen = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown section(s) {unknown}; choose from {', '.join(SECTIONS)}")
    return chosen


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sections", type=sections, default=list(SECTIONS), help=f"comma-separated: {','.join(SECTIONS)}")
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run of a few minutes")
    p.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    p.add_argument("--out", type=Path, help="write benchmarks.md, img/ and results there instead of docs/")
    p.add_argument("--render-only", action="store_true", help="measure nothing: redraw from the results file")
    p.add_argument("--ray-reports", type=int, help="fold vs Ray: longest stream (reports)")
    p.add_argument("--ray-budget", type=float, help="fold vs Ray: seconds of manager time per Ray pass")
    p.add_argument("--events", type=int, help="end to end: events preloaded per workload")
    p.add_argument("--repeats", type=int, help="end to end and partitions: runs of each")
    p.add_argument("--rates", type=ints, help="latency: reports/s, comma-separated")
    p.add_argument("--seconds", type=float, help="latency: seconds sent at each rate")
    p.add_argument("--history", type=ints, help="recovery: history lengths (events)")
    p.add_argument("--intervals", type=ints, help="recovery: snapshot intervals (events)")
    p.add_argument("--interval-history", type=int, help="recovery: history for the interval sweep")
    p.add_argument("--scale-events", type=int, help="partitions: events produced")
    p.add_argument("--runs", type=int, help="memory: concurrent runs")
    p.add_argument("--window-reports", type=int, help="memory: reports per run past a full dedup window")
    return p


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Options, with every size left unset taken from the full or the quick defaults."""
    args = parser().parse_args(argv)
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def section_command(name: str, args: argparse.Namespace) -> str:
    """The command that re-measures one section with the same sizes."""
    words = ["python", "-m", "bench.report", "--sections", name]
    for flag in FLAGS[name]:
        words += [f"--{flag.replace('_', '-')}", flag_text(getattr(args, flag))]
    return shlex.join(words)


def flag_text(value: object) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def paths(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """(the document, the image directory, the results file)."""
    if args.out is None and not args.quick:
        return REPO / "docs/benchmarks.md", REPO / "docs/img", REPO / "docs/img/bench_report.json"
    out = args.out or Path(tempfile.mkdtemp(prefix="ckptlog-bench-quick-"))
    out.mkdir(parents=True, exist_ok=True)
    doc = out / "benchmarks.md"
    if not doc.exists():
        doc.write_text((REPO / "docs/benchmarks.md").read_text())
    return doc, out / "img", out / "img/bench_report.json"


def commit() -> str:
    """The checkout's commit, `+dirty` when tracked files differ from it."""

    def git(*words: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), *words], capture_output=True, text=True).stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")


def record(name: str, args: argparse.Namespace, data: Any) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    host = {"cpus": os.cpu_count(), "load": [round(x, 1) for x in os.getloadavg()]}  # the load when it ended
    return {
        "when": now,
        "commit": commit(),
        "command": section_command(name, args),
        "quick": args.quick,
        "host": host,
        "data": data,
    }


def load(results: Path) -> dict[str, Any]:
    return json.loads(results.read_text()) if results.exists() else {}


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    doc, img, results_path = paths(args)
    results = load(results_path)
    if not args.render_only:
        from bench.measure import measure_sections  # Kafka and Ray only when measuring

        for name, data in measure_sections(args):
            results[name] = record(name, args, data)
            results_path.parent.mkdir(parents=True, exist_ok=True)
            results_path.write_text(json.dumps(results, indent=1) + "\n")  # after each: a crash keeps the rest
    from bench.render import write_report

    write_report(results, doc, img)
    print(f"bench.report: wrote {doc} and {img}/ ({', '.join(results) or 'no sections'})", file=sys.stderr)


if __name__ == "__main__":
    main()
