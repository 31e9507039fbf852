"""Attack: one run id folded in two input partitions; the claims take the other
partition's run for the deleting run itself, and a kept (latest) checkpoint is deleted.

Nothing makes a record of run "r" land on the partition its key hashes to: the processor checks
`subject == key` only when there is a key (contract §2), never the partition. A record produced
without a key, to an explicit partition, or by a client whose default partitioner is not murmur2
(librdkafka's `consistent_random` is CRC32) is folded by another partition's fold, which does
not know the run's state there, and creates run "r" again, with the same root `/sr/r` (its own
run_started, or the implicit `{--storage-root}/r`). Within one partition such a report would be
`duplicate_checkpoint_path`; across partitions only the claims stand between the two, and the
claim of both is `run-{sha256("r")}`, naming "r": "a claim naming only the deleting run (its own
earlier root) is no bar", so no `root_shared` is logged and nothing is refused. The Deleter's
re-check asks the state of the partition whose run "r" it serves, which owes the deletion.

Each partition has its own Fold and its own Deleter sharing `--storage-root`, claims are made as
the service makes them (the roots a batch registered, after it commits), and partition 0's
claim is written before partition 1 folds anything.
"""

from __future__ import annotations

from pathlib import Path

from ckptlog.events.decoded import CheckpointConfig
from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.core.lifecycle import deletion_problem
from ckptlog.processor.storage.deletion import Deleter, RetryPolicy
from tests import factories as f


def _partition(sr: str, records: list[bytes]) -> tuple[Fold, list[tuple[str, str]], list[object]]:
    """Fold one batch as `BatchFolder` does: the roots it registered, and its evictions."""
    fold = Fold(FoldSettings(default_config=CheckpointConfig(num_to_keep=1), default_root=sr, outer_root=sr))
    fold.roots.fresh = []
    deletions: list[object] = []
    for raw in records:
        effects = fold.apply(f.event(raw))
        assert effects.rejection is None, effects.rejection
        deletions.extend(effects.deletions)
    return fold, fold.roots.claimed(), deletions


async def test_a_run_folded_in_a_second_partition_deletes_the_first_ones_latest_checkpoint(tmp_path: Path) -> None:
    sr = f"file://{tmp_path}/sr"
    (tmp_path / "sr/r/c1").mkdir(parents=True)
    (tmp_path / "sr/r/c1/model.bin").write_bytes(b"r's latest checkpoint")
    retry = RetryPolicy(max_attempts=1, base_delay=0.001)

    # partition 0: the run as its training job (keyed, murmur2) writes it; keeps everything
    fold0, claims0, evicted0 = _partition(sr, [f.started("r", f"{sr}/r", keep=None), f.report("r", {}, f"{sr}/r/c1")])
    deleter0 = Deleter(outer_root=sr, retry=retry, recheck=lambda key: deletion_problem(fold0.runs.get(key[0]), key[1]))
    deleter0.claim_many(claims0, "events[0]")  # as the service claims: naming the partition folding it
    assert await deleter0.claims.drain(timeout=10) and not evicted0
    assert fold0.runs["r"].latest is not None and fold0.runs["r"].latest.path == f"{sr}/r/c1"

    # partition 1: records with subject (and key) "r" that landed there; keep 1
    records1 = [f.started("r", f"{sr}/r", keep=1), f.report("r", {}, f"{sr}/r/c1"), f.report("r", {}, f"{sr}/r/c2")]
    fold1, claims1, evicted1 = _partition(sr, records1)
    done: list[tuple[str, str]] = []
    refused: list[tuple[tuple[str, str], str]] = []
    deleter1 = Deleter(
        outer_root=sr,
        retry=retry,
        on_done=done.extend,
        on_refused=refused.extend,
        recheck=lambda key: deletion_problem(fold1.runs.get(key[0]), key[1]),
    )
    deleter1.claim_many(claims1, "events[1]")
    assert await deleter1.claims.drain(timeout=10)
    assert deleter1.claims.shared, "root_shared: partition 0 claims run 'r's root too"
    deleter1.submit_many(evicted1, "events[1]")  # type: ignore[arg-type]  # after the batch committed
    await deleter1.drain(timeout=10)
    await deleter0.close()
    await deleter1.close()

    assert (tmp_path / "sr/r/c1/model.bin").exists(), (
        f"partition 0's latest kept checkpoint of run 'r' was deleted by partition 1 (done={done}, refused={refused})"
    )
