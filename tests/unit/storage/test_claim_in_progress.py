"""A claim directory with no claim in it yet (contract §9), on a real tree.

`claim_local` makes `{root}/.ckptlog-run`, then links its claim into it. A deletion walking the
root in between (another thread of the same processor: claims and deletions run side by side
after a restore), or after a claimer killed in between, found an empty claim directory. It
counted as another run's root, and the deletion was refused for good: the crash matrix's
`restore-close-replay` chain once ended with 24 evicted checkpoints never deleted. Now such a
deletion fails for now and is retried; a claim naming another run still refuses it for good.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from ckptlog.events.paths import normalize
from ckptlog.processor.storage.claim_writer import claim_all
from ckptlog.processor.storage.claims import Claimant
from ckptlog.processor.storage.deletion import Deleter, RetryPolicy
from ckptlog.processor.storage.safety import Refused
from ckptlog.processor.storage.tree import remove_all


def _tree(tmp_path: Path) -> tuple[Path, str, str, str]:
    sr = tmp_path / "sr"
    ckpt = sr / "a" / "ckpt-1"
    (ckpt / "optim").mkdir(parents=True)
    (ckpt / "model.bin").write_bytes(b"evicted")
    outer = normalize(f"file://{sr}")
    return sr, outer, normalize(f"{outer}/a"), normalize(f"file://{ckpt}")


def test_an_empty_claim_directory_at_the_root_is_retried_not_refused(tmp_path: Path) -> None:
    sr, outer, root, ckpt = _tree(tmp_path)
    (sr / "a" / ".ckptlog-run").mkdir()  # the claimer died between mkdir and link
    (outcome,) = remove_all([(ckpt, root, Claimant("a"))], {}, outer)
    assert isinstance(outcome, Refused) and outcome.retry, outcome
    assert "no claim in it yet" in outcome.reason and (sr / "a" / "ckpt-1" / "model.bin").exists()
    assert claim_all([(root, Claimant("a", "t[0]"))], outer, {}) == [None]  # the owner's next claim
    assert remove_all([(ckpt, root, Claimant("a", "t[0]"))], {}, outer) == [None]
    assert not (sr / "a" / "ckpt-1").exists()


def test_an_empty_claim_directory_inside_a_checkpoint_is_retried_too(tmp_path: Path) -> None:
    sr, outer, root, ckpt = _tree(tmp_path)
    assert claim_all([(root, Claimant("a"))], outer, {}) == [None]
    (sr / "a" / "ckpt-1" / "optim" / ".ckptlog-run").mkdir()  # a root being claimed inside it
    (outcome,) = remove_all([(ckpt, root, Claimant("a"))], {}, outer)
    assert isinstance(outcome, Refused) and outcome.retry and (sr / "a" / "ckpt-1" / "model.bin").exists()


def test_another_runs_claim_still_refuses_for_good(tmp_path: Path) -> None:
    sr, outer, root, ckpt = _tree(tmp_path)
    assert claim_all([(root, Claimant("a"))], outer, {}) == [None]
    (shared,) = claim_all([(normalize(f"{root}/ckpt-1/optim"), Claimant("b"))], outer, {})
    assert shared is not None and "'a'" in str(shared)  # claimed, and reported as nested in a's root
    (outcome,) = remove_all([(ckpt, root, Claimant("a"))], {}, outer)
    assert isinstance(outcome, Refused) and not outcome.retry and "'b'" in outcome.reason
    assert (sr / "a" / "ckpt-1" / "model.bin").exists()


async def test_the_deleter_retries_until_the_claim_is_written_then_deletes(tmp_path: Path) -> None:
    sr, outer, root, ckpt = _tree(tmp_path)
    (sr / "a" / ".ckptlog-run").mkdir()
    done: list[tuple[str, str]] = []
    refused: list[tuple[tuple[str, str], str]] = []
    deleter = Deleter(
        outer_root=outer,
        retry=RetryPolicy(max_attempts=50, base_delay=0.02, max_delay=0.05),
        on_done=done.extend,
        on_refused=refused.extend,
    )
    assert deleter.submit("a", ckpt, root)
    await asyncio.sleep(0.2)  # several attempts meet the empty claim directory
    assert not done and not refused and deleter.counts.failed >= 2
    claimer = threading.Thread(target=claim_all, args=([(root, Claimant("a"))], outer, {}))
    claimer.start()
    claimer.join()
    assert await deleter.drain(timeout=10)
    assert done == [("a", ckpt)] and not refused and not (sr / "a" / "ckpt-1").exists()
    await deleter.close()
