"""The crash matrix, quick version: every crash point once, on small streams (see crash_matrix.py).

Chains of kills, each ending with a settled check against a clean fold of the log: exactly_once
on a local tree (the commit cycle and deletions; snapshots; restore, close and replay),
at_least_once, and exactly_once with snapshots and checkpoints on S3 (moto). The long version:
`python -m tests.reliability.crash_matrix --events 100000 [--s3]` (docs/reliability.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptlog.processor.failpoints import POINTS
from tests.reliability import snapshot_faults
from tests.reliability.crash_matrix import Chain, Scenario, applicable

pytestmark = pytest.mark.timeout(240)

QUICK = [
    Scenario(
        "commit-and-deletions",
        (
            "batch.folded@2",
            "commit.before@3",
            "commit.after@3",
            "deletions.before_handover@2",
            "deletions.after_handover@2",
            "deletion.job_start@2",
            "deletion.after_one@3",
            "deletion.confirmed@2",
            "restore.redriven@1",
            "completions.before_send@2",
            "completions.sent@2",
        ),
        seed=11,
    ),
    Scenario(
        "snapshots",
        (
            "snapshot.encoded@1",
            "snapshot.before_write@2",
            "object.half_written@1",
            "object.before_rename@1",
            "snapshot.before_prune@2",
            "snapshot.pruned_one@1",
            "snapshot.written@1",
        ),
        seed=12,
    ),
    Scenario(
        "incremental-snapshots",
        (
            "snapshot.captured@2",  # a delta's moment taken, the fold going on
            "snapshot.written@3",  # between two delta writes
            "lose.delta@1",  # the newest delta of each partition lost
            "object.half_written@3",  # a delta (or base) half written
            "snapshot.compacting@1",  # a new base replacing a chain, not yet written
            "tear.delta@1",  # the newest delta torn
            "snapshot.before_prune@3",
        ),
        seed=16,
        runs=20,
        snapshot_every=15,
    ),
    Scenario(
        "restore-close-replay",
        (
            "restore.after_fence@2",
            "restore.before_seek@1",
            "close.before_final_snapshot@1",
            "replay.batch@1",
            "replay.before_write@2",
            "restore.snapshot_loaded@2",
            "restore.caught_up@2",
            "close.after_final_snapshot@2",
        ),
        seed=13,
    ),
    Scenario(
        "at-least-once",
        ("commit.published_not_committed@2", "commit.after@2", "deletions.after_handover@2", "restore.caught_up@1"),
        guarantee="at_least_once",
        seed=14,
    ),
    Scenario(
        "s3",
        (
            "object.before_put@2",
            "snapshot.before_prune@1",
            "deletion.after_one@2",
            "deletion.confirmed@1",
            "restore.redriven@1",
            "completions.sent@1",
            "close.before_final_snapshot@1",
            "replay.before_write@1",
        ),
        s3=True,
        seed=15,
        from_snapshot=True,
    ),
]


def test_the_quick_matrix_aims_at_every_point() -> None:
    aimed = {spec.split("@")[0] for scenario in QUICK for spec in scenario.kills}
    assert aimed == set(POINTS) | set(snapshot_faults.FAULTS)
    for scenario in QUICK:
        assert all(applicable(spec.split("@")[0], scenario.guarantee, scenario.s3) for spec in scenario.kills)


@pytest.mark.parametrize("scenario", QUICK, ids=[s.name for s in QUICK])
async def test_crash_matrix(
    scenario: Scenario, kafka_bootstrap: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    s3 = request.getfixturevalue("s3_endpoint") if scenario.s3 else None
    report = await Chain(scenario, kafka_bootstrap, tmp_path, s3).run()
    print(report.summary())
    assert not report.problems, "\n".join([report.summary(), *report.problems])
    assert report.landed == list(scenario.kills)
    assert report.events >= scenario.min_events
