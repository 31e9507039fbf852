"""The Deleter's cost per deletion on a real local tree: `python -m bench.deleter [N] [--runs R] [--files F]`.

Makes R claimed run roots below a temporary `--storage-root` (as the processor claims them) and N
checkpoint directories of F files each spread over them, then submits every deletion at once and
waits until each is confirmed gone: every one walks from the bound to its root and through its
checkpoint's tree for claims (contract §9) before it is removed, after a re-check of what is owed
(a set lookup here, the partition's state in the processor). Prints, per deletion, the wall
time, the event loop thread's CPU (submission, checks, scheduling) and the process's CPU (the
worker threads' walks and removals too), best of `--repeat`. The command uses only the Deleter's
public API, so a before/after is one checkout apart: `PYTHONPATH=<checkout> python -m bench.deleter`.
Seconds here are noisy on a shared host; instructions repeat (callgrind counts every thread):

    valgrind --tool=callgrind --callgrind-out-file=/tmp/d.out python -m bench.deleter 1000 --repeat 1
    valgrind --tool=callgrind --callgrind-out-file=/tmp/s.out python -m bench.deleter 1000 --repeat 1 --setup-only

(total - setup-only) / N is the Deleter's cost per deletion in user-space instructions.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from ckptlog.events.paths import normalize
from ckptlog.processor.storage.deletion import Deleter


def make_tree(base: Path, runs: int, checkpoints: int, files: int) -> list[tuple[str, str, str]]:
    """The (run id, checkpoint URL, root URL) of every checkpoint made."""
    made = []
    for at in range(checkpoints):
        run = f"run-{at % runs}"
        ckpt = base / run / f"ckpt-{at:07d}"
        (ckpt / "optim").mkdir(parents=True)
        for i in range(files):
            (ckpt / ("optim" if i % 2 else "") / f"part-{i}.bin").write_bytes(b"x")
        made.append((run, normalize(f"file://{ckpt}"), normalize(f"file://{base}/{run}")))
    return made


async def one_round(args: argparse.Namespace) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory(prefix="bench-deleter-") as tmp:
        base = Path(tmp) / "runs"
        outer = normalize(f"file://{base}")
        made = make_tree(base, args.runs, args.n, args.files)
        owed = {(run, url) for run, url, _ in made}  # the processor's re-check asks its partition's state
        recheck = lambda key: None if key in owed else "not owed"
        deleter = Deleter(outer_root=outer, concurrency=args.concurrency, recheck=recheck)
        deleter.claim_many(sorted({(root, run) for run, _, root in made}), "bench[0]")
        assert await deleter.claims.drain(timeout=60)
        if args.setup_only:
            await deleter.close()
            return 0.0, 0.0, 0.0
        wall, loop_cpu, cpu = time.perf_counter(), time.thread_time(), time.process_time()
        for run, url, root in made:
            deleter.submit(run, url, root, "bench[0]")
        assert await deleter.drain(timeout=600) and deleter.counts.deleted == args.n, deleter.counts
        wall, loop_cpu, cpu = time.perf_counter() - wall, time.thread_time() - loop_cpu, time.process_time() - cpu
        await deleter.close()
        assert not any(base.glob("run-*/ckpt-*")), "a checkpoint was left"
    return wall, loop_cpu, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", type=int, nargs="?", default=5000, help="checkpoints to delete")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--files", type=int, default=4, help="files per checkpoint (half in a subdirectory)")
    parser.add_argument("--concurrency", type=int, default=8, help="Deleter jobs at a time")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--setup-only", action="store_true", help="make and claim the tree, delete nothing")
    args = parser.parse_args()
    rounds = [asyncio.run(one_round(args)) for _ in range(args.repeat)]
    for name, at in (("wall", 0), ("loop_cpu", 1), ("process_cpu", 2)):
        per = sorted(r[at] / args.n * 1e6 for r in rounds)
        print(f"{name}_us_per_deletion best={per[0]:.1f} median={statistics.median(per):.1f}")


if __name__ == "__main__":
    main()
