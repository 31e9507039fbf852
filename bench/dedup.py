"""What deduplication costs the fold (issue 39 item 1): `python -m bench.dedup --baseline DIR`.

Compares this tree's fold with the code in DIR (a checkout from before a change, e.g.
`git -C REPO archive main | tar -x -C /tmp/base`; it runs with PYTHONPATH=DIR) on the same files:
bench.fold's keep=5 workload (10 runs, 10% validated) with foreign ids (`rep-{i}`) and with the
structured ids ckptlog's clients send (contract §3 "Deduplication"). Per id kind, the two trees
alternate, `--pairs` times:

1. `ckptlog fold FILE --workers 1`, the whole process: reports/s of wall and of CPU time;
2. in one process, as the processor folds (output events built): µs per report, the median
   500-report chunk of the last 10k of `--reports` (`python -m bench.fold --tail-of`);
3. with `--instructions`: callgrind's marginal instructions per event between half and all of
   the lines (repeatable where seconds are not; minutes per tree).

Prints every measurement, then per id kind the medians and new / baseline, and the best (lowest)
in-process time of each tree: on a shared host, preemption only ever adds time.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.instructions import instructions
from bench.workload import IdKind, write


def env(tree: Path | None) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)} if tree is not None else dict(os.environ)


def whole(path: Path, tree: Path | None) -> tuple[float, float]:
    """Wall and CPU seconds of `ckptlog fold FILE --workers 1`."""
    argv = [sys.executable, "-m", "ckptlog.cli", "fold", str(path), "--workers", "1", "--no-progress"]
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env(tree))
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def in_process(path: Path, reports: int, tree: Path | None) -> float:
    """µs per report as the processor folds, in a fresh process of `tree`."""
    argv = [sys.executable, "-m", "bench.fold", "--tail-of", str(path), "--reports", str(reports), "--emit"]
    return float(subprocess.run(argv, check=True, capture_output=True, text=True, env=env(tree)).stdout)


def marginal_instructions(path: Path, tree: Path | None) -> float:
    lines = path.read_bytes().splitlines(keepends=True)
    half = path.with_suffix(".half.jsonl")
    half.write_bytes(b"".join(lines[: len(lines) // 2]))
    saved = os.environ.get("PYTHONPATH")
    os.environ.update(env(tree))
    try:
        small, large = instructions(half), instructions(path)
    finally:
        os.environ.pop("PYTHONPATH", None) if saved is None else os.environ.update(PYTHONPATH=saved)
    return (large - small) / (len(lines) - len(lines) // 2)


def compare(path: Path, kind: IdKind, reports: int, baseline: Path, pairs: int, count: bool) -> None:
    trees = {"new": None, "baseline": baseline}
    got: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": [], "us": [], "ir": []} for name in trees}
    for pair in range(pairs):
        for name, tree in trees.items() if pair % 2 == 0 else reversed(trees.items()):
            wall, cpu = whole(path, tree)
            us = in_process(path, reports, tree)
            got[name]["wall"].append(reports / wall)
            got[name]["cpu"].append(reports / cpu)
            got[name]["us"].append(us)
            print(
                f"{kind} ids, {name}: ckptlog fold {reports / wall:,.0f} reports/s wall ({reports / cpu:,.0f} CPU), "
                f"in process with outputs {us:.2f} us/report",
                flush=True,
            )
    if count:
        for name, tree in trees.items():
            got[name]["ir"].append(marginal_instructions(path, tree))
            print(f"{kind} ids, {name}: {got[name]['ir'][0] / 1e3:.2f}k instructions per event", flush=True)
    new, base = ({k: statistics.median(v) if v else 0.0 for k, v in got[n].items()} for n in trees)
    ratios = {k: (new[k] / base[k] if base[k] else float("nan")) for k in new}
    print(
        f"{kind} ids, medians of {pairs}: reports/s wall {new['wall']:,.0f} vs {base['wall']:,.0f} "
        f"({ratios['wall']:.3f}x), CPU {new['cpu']:,.0f} vs {base['cpu']:,.0f} ({ratios['cpu']:.3f}x); "
        f"in process {new['us']:.2f} vs {base['us']:.2f} us/report ({ratios['us']:.3f}x the time), "
        f"best {min(got['new']['us'], default=0):.2f} vs {min(got['baseline']['us'], default=0):.2f}"
        + (
            f"; instructions per event {new['ir'] / 1e3:.2f}k vs {base['ir'] / 1e3:.2f}k ({ratios['ir']:.3f}x)"
            if count
            else ""
        ),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="the code to compare with (a source tree)")
    parser.add_argument("--reports", type=int, default=200_000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--ids", default="foreign,structured", help="which id kinds (comma-separated)")
    parser.add_argument("--instructions", action="store_true", help="also count instructions (valgrind)")
    args = parser.parse_args()
    if not (args.baseline / "ckptlog" / "__init__.py").exists():
        sys.exit(f"error: {args.baseline} holds no ckptlog package")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.ids.split(","):
            path = Path(tmp) / f"keep-5-{kind}.jsonl"
            write(path, args.reports, 5, 0.1, ids=kind)
            compare(path, kind, args.reports, args.baseline, args.pairs, args.instructions)


if __name__ == "__main__":
    main()
