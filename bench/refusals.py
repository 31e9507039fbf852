"""The loop's CPU per refused deletion, logged as the processor logs: `python -m bench.refusals [N]
[--runs R] [--per-call K] [--repeat X]`.

Submits N deletions the Deleter refuses at once (each path lies outside `--storage-root`, as a
misconfigured root or another deployment's runs would), spread over R runs in calls of K requests
(`submit_many`, as a partition's batch submits them; K=1 is `submit`), with the processor's log
handler: `configure_logging("console", "INFO")` writing through the CLI's `RedactedStderr` (as
`ckptlog run` installs it) to /dev/null. Prints the CPU per refused path (time.process_time, best
and median of `--repeat`), the log lines written and the refusals `on_refused` received (every
one must). The command uses only the Deleter's public API, so a before/after is one checkout
apart; run it as a script from outside the checkouts, so that PYTHONPATH picks the ckptlog measured:

    cd /tmp && PYTHONPATH=<checkout> <venv>/bin/python <this checkout>/bench/refusals.py --per-call 100

Measured (2 shared cores, 100,000 refusals over 10 runs, best of 3): one line per path (before)
85 us per refused path in calls of 100, 81 us one by one; limited per run (deletion_log.py)
3.5 us and 5.2 us, 20 log lines in all.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from dataclasses import dataclass

from ckptlog.cli.errors import RedactedStderr
from ckptlog.processor.service.logs import configure_logging
from ckptlog.processor.storage.deletion import Deleter


@dataclass(frozen=True, slots=True)
class Request:
    run_id: str
    path: str
    root: str


class Counting(logging.Handler):
    """Counts the records the root logger lets through (beside the real handler)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.lines += 1


def requests(n: int, runs: int) -> list[Request]:
    """N refused requests, grouped by run as a batch submits them: each run's root is under
    /bench/runs, the outer root is /bench/other, so check 1 (confinement) refuses every one."""
    per_run = -(-n // runs)
    return [
        Request(f"run-{r}", f"file:///bench/runs/run-{r}/ckpt-{i:07d}", f"file:///bench/runs/run-{r}")
        for r in range(runs)
        for i in range(per_run)
    ][:n]


async def one_round(args: argparse.Namespace, counting: Counting) -> tuple[float, int, int]:
    got: list[object] = []
    deleter = Deleter(outer_root="file:///bench/other", on_refused=got.extend)
    todo = requests(args.n, args.runs)
    lines_before = counting.lines
    cpu = time.process_time()
    for at in range(0, len(todo), args.per_call):
        deleter.submit_many(todo[at : at + args.per_call], "bench[0]")
    await deleter.close()  # a summary line owed is written here
    cpu = time.process_time() - cpu
    assert deleter.counts.refused == args.n and len(got) == args.n, (deleter.counts, len(got))
    return cpu, counting.lines - lines_before, len(got)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", type=int, nargs="?", default=100_000, help="refused deletions to submit")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--per-call", type=int, default=100, help="requests per submit_many call")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    real_stderr = sys.stderr
    with open("/dev/null", "w") as devnull:
        sys.stderr = RedactedStderr(devnull)
        try:
            configure_logging("console", "INFO")
            counting = Counting()
            logging.getLogger().addHandler(counting)
            rounds = [asyncio.run(one_round(args, counting)) for _ in range(args.repeat)]
        finally:
            logging.getLogger().handlers.clear()
            sys.stderr = real_stderr
    per = sorted(cpu / args.n * 1e6 for cpu, _, _ in rounds)
    print(f"refused={args.n} runs={args.runs} per_call={args.per_call}")
    print(f"cpu_us_per_refused best={per[0]:.2f} median={statistics.median(per):.2f}")
    print(f"log_lines_per_round={rounds[-1][1]} on_refused_received={rounds[-1][2]}")


if __name__ == "__main__":
    main()
