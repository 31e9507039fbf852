"""The batch's remembered resolutions and claim readings (LocalTree.batch, claims.claimant_in) attacked across
runs on a real tree: equal claim bytes in two runs' roots, runs interleaved in one batch, a run root swapped for a
link to another run's root mid-batch. Nothing of another run, nor anything outside a root, is deleted."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from ckptlog.events.paths import CLAIM_DIR
from ckptlog.processor.storage import local_tree
from ckptlog.processor.storage.claims import Claimant, claim_body, claim_name
from ckptlog.processor.storage.safety import Refused
from ckptlog.processor.storage.tree import remove_all

from .test_deletion_symlinks import tree

A, A2, B = Claimant("ra", "t[0]"), Claimant("ra", "t[1]"), Claimant("rb", "t[0]")


def runs(tmp_path: Path) -> tuple[Path, Path]:
    """Roots `ra` (claimed by A) and `rb` (claimed by B) under `tmp_path/s`, each with checkpoints c0..c2."""
    for run, claimant in (("ra", A), ("rb", B)):
        for at in range(3):
            (tmp_path / "s" / run / f"c{at}").mkdir(parents=True)
            (tmp_path / "s" / run / f"c{at}" / "model.bin").write_bytes(run.encode())
        claims = tmp_path / "s" / run / CLAIM_DIR
        claims.mkdir()
        (claims / claim_name(claimant)).write_bytes(claim_body(claimant))
    return tmp_path / "s" / "ra", tmp_path / "s" / "rb"


def item(root: Path, name: str, me: Claimant) -> tuple[str, str, Claimant]:
    return (f"file://{root}/{name}", f"file://{root}", me)


@pytest.mark.parametrize("bound", [True, False])
def test_a_copy_of_one_runs_claim_in_anothers_root_refuses_both_there_in_one_batch(tmp_path: Path, bound: bool) -> None:
    """A's claim file (same name, same bytes: the remembered reading) planted in B's root: B's root is shared, so
    neither A nor B deletes there, in a batch that first read the same bytes in A's own root."""
    ra, rb = runs(tmp_path)
    shutil.copy(ra / CLAIM_DIR / claim_name(A), rb / CLAIM_DIR / claim_name(A))
    items = [item(ra, "c0", A), item(rb, "c0", A), item(rb, "c1", B), item(ra, "c1", B), item(ra, "c2", A2)]
    before = tree(tmp_path)
    outcomes = remove_all(items, {}, f"file://{tmp_path / 's'}" if bound else None)
    assert outcomes[0] is None and not (ra / "c0").exists()
    for outcome in outcomes[1:4]:
        assert isinstance(outcome, Refused), outcome
    assert outcomes[4] is None or isinstance(outcomes[4], Refused)  # another partition's claimant of run ra
    gone = {"s/ra/c0", "s/ra/c0/model.bin"} | ({"s/ra/c2", "s/ra/c2/model.bin"} if outcomes[4] is None else set())
    assert {k: v for k, v in before.items() if k not in gone} == tree(tmp_path)


@pytest.mark.parametrize("bound", [True, False])
def test_a_run_root_swapped_for_a_link_to_another_runs_root_mid_batch_deletes_nothing_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bound: bool
) -> None:
    """After the batch's first deletion in `ra` (its resolution remembered), `ra` is moved away and replaced by a
        link to `rb`: A's later deletions (another claimant of run ra too) never reach into B's root. (Without a bound,
    a root spelled through a link is trusted: an item of B's own claimant spelled through `ra` reaches B's root, as
    before the batch remembered anything; the fold never makes one, a run's items name its own root.)"""
    ra, rb = runs(tmp_path)
    real = local_tree._remove_seen

    def swapping(parent: int, seen: Any, url: str) -> None:
        real(parent, seen, url)
        monkeypatch.setattr(local_tree, "_remove_seen", real)
        os.rename(ra, tmp_path / "moved-ra")
        ra.symlink_to(rb, target_is_directory=True)

    monkeypatch.setattr(local_tree, "_remove_seen", swapping)
    before_rb = tree(rb)
    items = [item(ra, "c0", A), item(ra, "c1", A2), item(ra, "c2", A), item(ra, "c1", A)]
    outcomes = remove_all(items, {}, f"file://{tmp_path / 's'}" if bound else None)
    assert outcomes[0] is None
    assert tree(rb) == before_rb, outcomes
    assert not (tmp_path / "moved-ra" / "c0").exists()
    for outcome in outcomes[1:]:  # refused at rb (A's claim is not there) or done in the moved ra: A's own
        assert outcome is None or isinstance(outcome, (Refused, str)), outcome
