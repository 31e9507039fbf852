"""Ray Train's CheckpointManager scenarios, re-expressed as logs folded by ckptlog."""

from __future__ import annotations

from ckptlog.processor.core import Fold, run_view
from ckptlog.processor.core.snapshot import Snapshot, canonical, decode, encode
from tests import factories as f

ROOT = "file:///ray/run"


def ck(i: int) -> str:
    return f"{ROOT}/checkpoint_{i:06d}"


def folded(*lines: bytes) -> Fold:
    fold = Fold()
    for raw in lines:
        assert fold.apply(f.event(raw)).rejection is None
    return fold


def test_save_load_state_equivalence() -> None:
    """Ray: a manager restored from its saved state equals the one that saved it."""
    log = [
        f.started(root=ROOT, keep=2, attr="score"),
        *[f.report(metrics={"score": s}, path=ck(i), validation=(i == 3)) for i, s in enumerate([3, 1, 4, 1, 5])],
    ]
    original = folded(*log)
    restored = decode(encode(Snapshot("ckptlog.events", 0, len(log), original.settings, original.runs)))
    assert canonical(run_view(restored.runs["r"])) == canonical(run_view(original.runs["r"]))
    again = Fold(restored.settings, restored.runs)
    nxt = f.report(metrics={"score": 9}, path=ck(9))
    a, b = original.apply(f.event(nxt)), again.apply(f.event(nxt))
    assert [o.data for o in a.outputs] == [o.data for o in b.outputs]
    assert [d.path for d in a.deletions] == [d.path for d in b.deletions]


def test_pending_validation_management() -> None:
    """Ray: pending checkpoints are kept beyond num_to_keep until their result arrives,
    VALIDATED merges metrics and re-sorts, FAILED/TIMEOUT keep the training-time position."""
    fold = folded(
        f.started(root=ROOT, keep=1, attr="score"),
        f.report(metrics={"score": 1}, path=ck(0), validation=True),
        f.report(metrics={"score": 2}, path=ck(1), validation=True),
        f.report(metrics={"score": 3}, path=ck(2), validation=True),
        f.report(metrics={"score": 0}, path=ck(3)),
    )
    run = fold.runs["r"]
    assert len(run.checkpoints) == 4 and list(run.pending) == [ck(0), ck(1), ck(2)]
    assert run.validated == 0
    for raw in (
        f.result("r", ck(0), "VALIDATED", {"score": 10}),
        f.result("r", ck(1), "VALIDATION_TIMEOUT"),
        f.result("r", ck(2), "VALIDATION_FAILED", {"score": 99}),
    ):
        fold.apply(f.event(raw))
    view = run_view(run)
    assert [c["path"] for c in view["checkpoints"]] == [ck(3), ck(0)]  # 3 is latest, 0 is best
    assert view["checkpoints"][1]["metrics"]["score"] == 10
    assert view["validated"] == view["committed"] == 4


def test_restart_hands_out_latest_checkpoint() -> None:
    """Ray's before_init_train_context: new workers resume from the latest checkpoint
    (not the best) and the report index continues."""
    fold = folded(
        f.started(root=ROOT, keep=3, attr="score"),
        f.report(metrics={"score": 9}, path=ck(0)),
        f.report(metrics={"score": 1}, path=ck(1)),
    )
    effects = fold.apply(f.event(f.restart(num_workers=8)))
    handed = effects.outputs[0].data
    assert handed["latest_checkpoint_path"] == ck(1)
    assert handed["report_count"] == 2 and handed["generation"] == 1
    fold.apply(f.event(f.report(metrics={"score": 5}, path=ck(2), generation=1)))
    assert run_view(fold.runs["r"])["checkpoints"][1]["report_index"] == 2


def test_keep_all_without_score_is_registration_order_and_best_is_latest() -> None:
    fold = folded(f.started(root=ROOT), *[f.report(path=ck(i)) for i in range(5)])
    view = run_view(fold.runs["r"])
    assert [c["path"] for c in view["checkpoints"]] == [ck(i) for i in range(5)]
    assert view["best"] == view["latest"] == ck(4)
