"""Attack: a claim on a root that lies *around* an already claimed root is not reported.

contract §9, "What a deployment may share": two runs of different partitions given nesting roots
are a deployment mistake; "across partitions the second claim is logged as an ERROR"
(`event=root_shared`), and from then on the deletions of either run that would reach the other's
are refused. The claim writer (then `markers._shared`, now
`claim_writer._shared`) only looked at the claimed root and the directories above it, never
below: when the inner root was claimed first, the outer claim is written as if nothing were
wrong. No `root_shared` for either run; the mistake shows only later, as every deletion of the
inner run is refused (the outer claim sits above its root).
"""

from __future__ import annotations

from pathlib import Path

from ckptlog.events.paths import normalize
from ckptlog.processor.storage.claim_writer import claim_all
from ckptlog.processor.storage.claims import Claimant, Shared


def test_claiming_a_root_around_a_claimed_root_is_reported_as_shared(tmp_path: Path) -> None:
    sr = normalize(f"file://{tmp_path}/sr")
    assert claim_all([(f"{sr}/v", Claimant("v", "in[1]"))], sr, {}) == [None]  # partition 1's run v, first
    outcome = claim_all([(sr, Claimant("x", "in[0]"))], sr, {})  # partition 0's run x: its root holds v's
    assert isinstance(outcome[0], Shared), f"x's claim around v's root was not reported: {outcome}"
