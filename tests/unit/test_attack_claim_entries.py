"""Attack: the claim reader trusts what it finds inside a `.ckptlog-run` claim directory.

The claim reader (then `ckptlog.processor.storage.markers.read_marker`, now
`ckptlog.processor.storage.local_tree`'s `LocalDir.claimants`) opened every entry of a claim directory with
`os.open(name, O_RDONLY | O_NOFOLLOW)` and `os.read` it, whatever it was:

- a FIFO blocks that `open` forever (no writer ever comes). A training job writes its own
  checkpoints and its own run root, so it can leave `ckpt/.ckptlog-run/x` (checked by
  the walk through the checkpoint on eviction) or `{root}/.ckptlog-run/x` (checked by every deletion of the run
  and by the claim writer). The worker thread never returns; the loop's default executor (6
  threads on this 2-core machine, shared by deletions, claims, snapshot writes and restores'
  snapshot loads) is used up by a handful of them, and `asyncio.run` waits for those threads at
  shutdown, so SIGTERM never finishes either;
- a directory: `os.read` raises IsADirectoryError, an OSError that is neither caught as
  "unreadable" nor final, so the deletion is retried every 30 s for ever and never settled
  (contract §7/§9: every eviction is eventually deleted, or settled as refused and reported).
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from ckptlog.events.paths import normalize
from ckptlog.processor.storage.claim_writer import claim_all
from ckptlog.processor.storage.claims import Claimant
from ckptlog.processor.storage.deletion import Deleter, RetryPolicy, _Request
from ckptlog.processor.storage.safety import Refused
from ckptlog.processor.storage.tree import remove_all

WAIT_S = 5.0


def _layout(tmp_path: Path, where: str) -> tuple[Path, str, str, str]:
    """`sr/a/ckpt-1` below run a's root; the claim directory planted in the checkpoint or the root."""
    sr = tmp_path / "sr"
    ckpt = sr / "a" / "ckpt-1"
    ckpt.mkdir(parents=True)
    (ckpt / "model.bin").write_bytes(b"evicted")
    claims = (ckpt if where == "checkpoint" else sr / "a") / ".ckptlog-run"
    claims.mkdir()
    outer = normalize(f"file://{sr}")
    return claims, outer, normalize(f"{outer}/a"), normalize(f"file://{ckpt}")


@pytest.mark.parametrize(
    ("where", "action"), [("checkpoint", "delete"), ("root", "delete"), ("root", "claim")], ids=str
)
def test_a_fifo_in_a_claim_directory_blocks_the_thread_for_good(tmp_path: Path, where: str, action: str) -> None:
    claims, outer, root, ckpt = _layout(tmp_path, where)
    os.mkfifo(claims / "trap")
    outcome: list[object] = []

    def work() -> None:
        if action == "delete":
            outcome.extend(remove_all([(ckpt, root, Claimant("a"))], {}, outer))
        else:
            outcome.extend(claim_all([(root, Claimant("a"))], outer, {}))

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(WAIT_S)
    blocked = thread.is_alive()
    if blocked:  # let the thread go: a writer end unblocks the reader's open
        os.close(os.open(claims / "trap", os.O_WRONLY | os.O_NONBLOCK))
        thread.join(WAIT_S)
    assert not blocked, f"the {action} was still blocked in open() on the FIFO after {WAIT_S}s"


def test_a_directory_in_a_claim_directory_makes_the_deletion_fail_for_ever(tmp_path: Path) -> None:
    claims, outer, root, ckpt = _layout(tmp_path, "checkpoint")
    (claims / "sub").mkdir()
    outcomes = remove_all([(ckpt, root, Claimant("a"))], {}, outer)
    # None (deleted) or Refused (settled, reported) would end it; an error text is retried for ever
    assert all(o is None or isinstance(o, Refused) for o in outcomes), outcomes


def _release_readers(traps: list[Path]) -> None:
    """Open (and close) a writer end of every FIFO a reader is blocked on: its open returns, it reads EOF."""
    for trap in traps:
        try:
            os.close(os.open(trap, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # ENXIO: no reader waiting on this one now
            pass


async def test_fifos_in_evicted_checkpoints_starve_every_other_worker_thread(tmp_path: Path) -> None:
    """The processor-wide effect: evictions whose checkpoints hold a FIFO use up the default
    executor, so nothing else that runs in a worker thread (a snapshot write, a restore's snapshot
    load, a claim, a kept-checkpoint check) runs any more."""
    sr = tmp_path / "sr"
    outer, root = normalize(f"file://{sr}"), normalize(f"file://{sr}/a")
    traps = []
    for i in range(32):  # the default executor has at most 32 threads
        claims = sr / "a" / f"ckpt-{i}" / ".ckptlog-run"
        claims.mkdir(parents=True)
        os.mkfifo(claims / "trap")
        traps.append(claims / "trap")
    deleter = Deleter(outer_root=outer, concurrency=32, retry=RetryPolicy(max_attempts=1, base_delay=0.001))
    assert deleter.submit_many([_Request("a", f"{root}/ckpt-{i}", root) for i in range(32)]) == 32
    await asyncio.sleep(0.5)
    try:
        starved = False
        try:
            await asyncio.wait_for(asyncio.to_thread(lambda: None), WAIT_S)  # e.g. SnapshotWriter's store.write
        except TimeoutError:
            starved = True
    finally:
        for _ in range(300):  # release the blocked threads (this test shares its event loop with the others)
            _release_readers(traps)
            if not deleter.backlog:
                break
            await asyncio.sleep(0.05)
        await deleter.close()
    assert not starved, "no worker thread was left for anything else: the deletions hold them all, for good"
