"""The ordered checks of ckptlog/processor/storage/safety.py, each alone: its verdict and its reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptlog.events.paths import normalize
from ckptlog.processor.storage.claims import CLAIMING, UNREADABLE, Claimant
from ckptlog.processor.storage.ownership import Claims
from ckptlog.processor.storage.safety import Checks, Dropped, Held, Key, Refused, nesting, ownership

OUTER = "file:///sr"
ROOT = "file:///sr/team/a"


@pytest.mark.parametrize(
    ("path", "root", "why"),
    [
        ("file:///sr/team/b/c0", ROOT, "not strictly under the run's storage root"),
        (ROOT, ROOT, "not strictly under the run's storage root"),
        ("file:///elsewhere/a/c0", "file:///elsewhere/a", "not strictly under the processor's storage bound"),
        ("file:///sr/team/a/../b/c0", ROOT, ".."),
        ("file:///sr/team/a/c0", "file:///", "the run's storage root is unsafe"),
    ],
)
def test_confinement_refuses_for_good_naming_what_is_wrong(path: str, root: str, why: str) -> None:
    verdict, _, _ = Checks(OUTER).at_submission(path, root)
    assert isinstance(verdict, Refused) and not verdict.retry
    assert why in verdict.reason


def test_confinement_lets_a_path_below_both_bounds_through_in_its_canonical_spelling() -> None:
    verdict, url, root = Checks(OUTER).at_submission("file:///sr/team/a/./c0/", ROOT)
    assert verdict is None and url == "file:///sr/team/a/c0" and root == ROOT


async def test_a_pending_retired_claim_holds_the_deletion_before_the_recheck_is_asked(tmp_path: Path) -> None:
    asked: list[Key] = []
    claims = Claims(outer_root=None)
    root = normalize(f"file://{tmp_path}/a")
    checks = Checks(None, claims, lambda key: asked.append(key) or None)
    claims.claim_many([(root, "a")], "t[0]", retired=True)
    held = checks.before_removal(("b", f"{root}/c0"), f"{root}/c0")
    assert isinstance(held, Held) and "retired claim" in held.reason and asked == []
    assert checks.before_removal(("b", f"{root}x/c0"), f"{root}x/c0") is None and asked == [("b", f"{root}x/c0")]
    assert await claims.drain(timeout=10)  # written: nothing is held any more
    assert checks.before_removal(("b", f"{root}/c0"), f"{root}/c0") is None
    await claims.close()


def test_the_recheck_drops_a_path_no_longer_owed_with_its_reason() -> None:
    checks = Checks(OUTER, None, lambda key: "it is live again" if key[0] == "a" else None)
    assert checks.before_removal(("a", f"{ROOT}/c0"), f"{ROOT}/c0") == Dropped("it is live again")
    assert checks.before_removal(("b", f"{ROOT}/c0"), f"{ROOT}/c0") is None


ME = Claimant("a", "t[0]")


@pytest.mark.parametrize(
    ("found", "refused", "retry"),
    [
        (None, False, False),  # no claim directory there
        ({ME}, False, False),
        ({Claimant("a")}, False, False),  # an offline fold's claim is every partition's
        ({ME, Claimant("b", "t[1]")}, True, False),
        ({Claimant("a", "t[1]")}, True, False),  # the same id folded by another partition
        ({Claimant("a", "t[0]", retired=True)}, True, False),  # a finished run's: nobody's, its own id included
        ({UNREADABLE}, True, False),
        ({CLAIMING}, True, True),  # a claim still being written: later
    ],
)
def test_ownership_and_nesting_judge_the_claims_the_walk_found(
    found: set[Claimant] | None, refused: bool, retry: bool
) -> None:
    for verdict in (ownership(ROOT, found, ME), nesting(f"{ROOT}/c0/x", found, ME)):
        assert isinstance(verdict, Refused) is refused, verdict
        if isinstance(verdict, Refused):
            assert verdict.retry is retry and verdict.reason.startswith(ROOT)
            assert "finished" in verdict.reason if any(c.retired for c in found or ()) else True


def test_a_refusal_names_the_other_runs_and_nesting_without_a_claimant_refuses_any_claim() -> None:
    verdict = ownership(ROOT, {ME, Claimant("b", "t[1]"), Claimant("c")}, ME)
    assert isinstance(verdict, Refused) and "'b' (t[1]), 'c'" in verdict.reason
    assert isinstance(nesting(ROOT, {ME}, None), Refused)
