"""The local walk's cost per deleted checkpoint: `python -m bench.removal [N] [--batch B] [--repeat R] [--setup-only]`.

Makes N checkpoint directories shaped as the dense workload makes them (`{run}/ckpt-N/model.bin`,
256 bytes; bench.processor `materialize`) over 10 claimed run roots below a temporary
`--storage-root`, then deletes them with `tree.remove_all` in batches of B, as the Deleter's
worker thread does (one thread, no event loop). Prints per deleted checkpoint the wall time and
the process's user and system CPU of the `remove_all` calls only, best and median of R rounds.
The command uses only `remove_all`, so a before/after is one checkout apart
(`PYTHONPATH=<checkout> python -m bench.removal`). Seconds are noisy on a shared host; system
calls and instructions repeat:

    strace -f -o /tmp/s.txt python -m bench.removal 2000 --repeat 1 && python -m bench.removal --syscalls /tmp/s.txt
    valgrind --tool=callgrind --callgrind-out-file=/tmp/c.out \
        python -m bench.removal 2000 --repeat 1 --leave
    valgrind --tool=callgrind --callgrind-out-file=/tmp/s.out \
        python -m bench.removal 2000 --repeat 1 --leave --setup-only
    rm -rf /tmp/bench-removal-*    # (total - setup-only) / N: instructions per deleted checkpoint
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from ckptlog.events.paths import CLAIM_DIR, normalize
from ckptlog.processor.storage.claims import Claimant, claim_body, claim_name
from ckptlog.processor.storage.tree import remove_all

RUNS = 10
MARK = "/bench-removal-mark-"
"""Looked up (missing) just before and after the timed deletions: `--syscalls` counts between them."""


def make(base: Path, n: int) -> list[tuple[str, str, Claimant]]:
    """The `remove_all` items of n dense-shaped checkpoints, their roots claimed."""
    items = []
    for run in range(RUNS):
        me = Claimant(f"run-{run}", "bench[0]")
        (base / me.run / CLAIM_DIR).mkdir(parents=True)
        (base / me.run / CLAIM_DIR / claim_name(me)).write_bytes(claim_body(me))
    for at in range(n):
        me = Claimant(f"run-{at % RUNS}", "bench[0]")
        ckpt = base / me.run / f"ckpt-{at:07d}"
        ckpt.mkdir()
        (ckpt / "model.bin").write_bytes(b"\0" * 256)
        items.append((normalize(f"file://{ckpt}"), normalize(f"file://{base}/{me.run}"), me))
    return items


def one_round(n: int, batch: int, setup_only: bool, leave: bool) -> tuple[float, float, float]:
    tmp = tempfile.mkdtemp(prefix="bench-removal-")
    try:
        base = Path(tmp) / "runs"
        items = make(base, n)
        outer = normalize(f"file://{base}")
        if setup_only:
            return 0.0, 0.0, 0.0
        os.path.lexists(MARK + "start")
        wall, cpu = time.perf_counter(), os.times()
        for at in range(0, n, batch):
            outcomes = remove_all(items[at : at + batch], {}, outer)
            assert outcomes == [None] * len(outcomes), outcomes[:3]
        wall, user, system = time.perf_counter() - wall, os.times().user - cpu.user, os.times().system - cpu.system
        os.path.lexists(MARK + "end")
        assert not any(base.glob("*/ckpt-*")), "every checkpoint is gone"
        return wall / n * 1e6, user / n * 1e6, system / n * 1e6
    finally:
        if not leave:
            shutil.rmtree(tmp)


def print_syscalls(log: Path, n: int) -> None:
    """System calls per deleted checkpoint between the marks of the first round, by name."""
    lines = log.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if MARK + "start" in line)
    end = next(i for i, line in enumerate(lines) if MARK + "end" in line)
    calls: dict[str, int] = {}
    for line in lines[start + 1 : end]:
        name = line.split(None, 1)[-1].split("(", 1)[0].lstrip("<.> ").split(" ")[0]
        if "resumed>" in line or not name or not name[0].isalpha():
            continue  # the second half of a call another thread interrupted, or a signal
        calls[name] = calls.get(name, 0) + 1
    total = sum(calls.values())
    print(f"{total / n:.2f} system calls per deleted checkpoint ({total} for {n}):")
    for name, count in sorted(calls.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<12} {count / n:6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("n", nargs="?", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=100, help="paths per remove_all call (the Deleter's batch)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--setup-only", action="store_true", help="make the trees, delete nothing")
    parser.add_argument("--leave", action="store_true", help="leave the temporary tree (its removal not counted)")
    parser.add_argument("--syscalls", metavar="STRACE_LOG", help="count an strace -f -o log between the marks")
    args = parser.parse_args()
    if args.syscalls:
        print_syscalls(Path(args.syscalls), args.n)
        return
    rounds = [one_round(args.n, args.batch, args.setup_only, args.leave) for _ in range(args.repeat)]
    print(f"remove_all of {args.n} dense checkpoints, batches of {args.batch}, pid {os.getpid()}, us per path:")
    for at, what in enumerate(("wall", "user CPU", "system CPU")):
        values = [round_[at] for round_ in rounds]
        print(f"  {what:<10} best {min(values):7.1f}  median {statistics.median(values):7.1f}")


if __name__ == "__main__":
    main()
