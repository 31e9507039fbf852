"""Attack: under file-descriptor pressure, the claim walk skips directories instead of failing.

The walk through a checkpoint's tree for claims (then `ckptlog.processor.storage.markers.marker_below`,
now `ckptlog.processor.storage.local_tree`'s `LocalDir.claims_below`) walked depth first and kept one open
directory fd per directory still to visit. A wide checkpoint (a sharded one has thousands of
shard directories) made it open one fd per sibling at once, and any `os.open` failure of a child
(`except OSError: continue`, meant for "swapped meanwhile") silently drops that subtree from the
check. EMFILE is such a failure, and it is transient: by the time `shutil.rmtree` runs, the
fds are closed again, so the tree is removed with another run's claimed root in it.

Here run "b" (another input partition, so the fold of run "a" cannot see it) was given a root
that lies inside run "a"'s checkpoint: the cross-partition nesting that the claims
exist to catch ("protected both ways", contract §9). Both roots are claimed as the service claims
them (each partition's own Deleter). The process has 40 fds to spare, the checkpoint 300 shard
directories: "a"'s eviction deletes "b"'s root and its kept checkpoint.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

from ckptlog.events.paths import normalize
from ckptlog.processor.storage.deletion import Deleter, RetryPolicy

SHARDS = 300
SPARE_FDS = 40


def _fds_in_use() -> list[int]:
    return [int(name) for name in os.listdir("/proc/self/fd")]


async def test_fd_pressure_makes_the_walk_skip_another_runs_claimed_root(tmp_path: Path) -> None:
    sr = tmp_path / "sr"
    ckpt = sr / "a" / "ckpt-1"
    for i in range(SHARDS):
        (ckpt / f"shard-{i:03d}").mkdir(parents=True)
    # the shard visited last (pushed last onto the walk's stack is popped first, so the last
    # sibling in directory order is the one opened last, when no fd is left)
    last = [entry.name for entry in os.scandir(ckpt)][-1]
    b_root = ckpt / last / "b"
    (b_root / "kept").mkdir(parents=True)
    (b_root / "kept" / "model.bin").write_bytes(b"b's kept checkpoint")

    outer = f"file://{sr}"
    a_root, b_url = normalize(f"{outer}/a"), normalize(f"file://{b_root}")
    refused: list[tuple[tuple[str, str], str]] = []
    done: list[tuple[str, str]] = []
    retry = RetryPolicy(max_attempts=1, base_delay=0.001)
    deleter_a = Deleter(outer_root=outer, retry=retry, on_refused=refused.extend, on_done=done.extend)
    deleter_b = Deleter(outer_root=outer, retry=retry)  # partition 1's processor
    deleter_a.claim_many([(a_root, "a")])
    assert await deleter_a.claims.drain(timeout=10)
    deleter_b.claim_many([(b_url, "b")])
    assert await deleter_b.claims.drain(timeout=10)
    assert (b_root / ".ckptlog-run").is_dir() and deleter_b.claims.shared  # b's claim is in place (and logged)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(_fds_in_use()) + SPARE_FDS, hard))
    try:
        assert deleter_a.submit("a", f"{a_root}/ckpt-1", a_root)  # a's eviction of its own checkpoint
        await deleter_a.drain(timeout=30)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    await deleter_a.close()
    await deleter_b.close()

    assert (b_root / "kept" / "model.bin").exists(), f"run b's kept checkpoint was deleted (done={done})"
    assert refused and "the claim of run 'b'" in refused[0][1]
