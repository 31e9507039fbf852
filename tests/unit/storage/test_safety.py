"""Deletion safety's checks each alone (storage/safety.py and the checks it names): verdict and reason."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ckptlog.events.paths import normalize
from ckptlog.processor.storage.claim_writer import ClaimWriter
from ckptlog.processor.storage.claims import CLAIMING, UNREADABLE, Claimant
from ckptlog.processor.storage.confinement import Confinement
from ckptlog.processor.storage.safety import Checks, Dropped, Held, Refused, nesting, ownership

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
    problem, _, _ = Confinement(OUTER).check(path, root)
    assert problem is not None and why in problem


def test_confinement_lets_a_path_below_both_bounds_through_in_its_canonical_spelling() -> None:
    problem, url, root = Confinement(OUTER).check("file:///sr/team/a/./c0/", ROOT)
    assert problem is None and url == "file:///sr/team/a/c0" and root == ROOT


def test_checks_confinement_is_check_one_as_the_deleter_submits() -> None:
    refused, _, _ = Checks(OUTER).confinement("file:///sr/team/a/../b", ROOT)
    assert isinstance(refused, Refused) and not refused.retry and ".." in refused.reason
    assert Checks(OUTER).confinement("file:///sr/team/a/c0", ROOT) == (None, "file:///sr/team/a/c0", ROOT)


async def test_a_pending_retired_claim_holds_paths_at_and_in_its_root_until_written(tmp_path: Path) -> None:
    claims = ClaimWriter(outer_root=None)
    root = normalize(f"file://{tmp_path}/a")
    claims.claim_many([(root, "a")], "t[0]", retired=True)
    assert claims.holds(f"{root}/c0") and not claims.holds(f"{root}x/c0")
    checks = Checks(None, claims, lambda key: "live again")
    held = checks.before_removal(("a", f"{root}/c0"), f"{root}/c0")
    assert isinstance(held, Held) and "retired claim" in held.reason  # check 2 comes before check 3
    assert await claims.drain(timeout=10)  # written: nothing is held any more
    assert not claims.holds(f"{root}/c0")
    assert checks.before_removal(("a", f"{root}/c0"), f"{root}/c0") == Dropped("live again")
    await claims.close()


def test_the_still_owed_recheck_is_asked_for_each_path_with_its_key() -> None:
    asked: list[tuple[str, str]] = []

    def recheck(key: tuple[str, str]) -> str | None:
        asked.append(key)
        return None if key[1].endswith("c0") else "no longer owed"

    checks = Checks(OUTER, recheck=recheck)
    assert checks.before_removal(("a", f"{ROOT}/c0"), f"{ROOT}/c0") is None
    assert checks.before_removal(("a", f"{ROOT}/c1"), f"{ROOT}/c1") == Dropped("no longer owed")
    assert asked == [("a", f"{ROOT}/c0"), ("a", f"{ROOT}/c1")]
    assert Checks(OUTER).before_removal(("a", f"{ROOT}/c1"), f"{ROOT}/c1") is None  # offline: no recheck


async def test_a_job_is_checked_in_one_call_held_paths_first_the_rest_asked_once_in_order(tmp_path: Path) -> None:
    """`before_removal_many`: check 2 for every path, check 3 asked once for those it let through (a
    held path is never asked), each verdict the one `before_removal` gives that path alone."""
    claims = ClaimWriter(outer_root=None)
    held_root, free_root = normalize(f"file://{tmp_path}/a"), normalize(f"file://{tmp_path}/b")
    claims.claim_many([(held_root, "a")], "t[0]", retired=True)
    keys = [("b", f"{free_root}/c0"), ("a", f"{held_root}/c0"), ("b", f"{free_root}/c1"), ("a", f"{held_root}/c1")]
    calls: list[list[tuple[str, str]]] = []

    def recheck_many(asked: Sequence[tuple[str, str]]) -> list[str | None]:
        calls.append(list(asked))
        return [None if key[1].endswith("c0") else "no longer owed" for key in calls[-1]]

    def recheck(key: tuple[str, str]) -> str | None:
        return recheck_many([key])[0]

    verdicts = Checks(None, claims, recheck_many=recheck_many).before_removal_many(keys, [k[1] for k in keys])
    assert calls == [[keys[0], keys[2]]]
    assert verdicts[0] is None and verdicts[2] == Dropped("no longer owed")
    assert all(isinstance(verdicts[at], Held) for at in (1, 3))
    one_by_one = Checks(None, claims, recheck)
    assert verdicts == [one_by_one.before_removal(key, key[1]) for key in keys]
    assert Checks(None, claims, recheck_many=recheck_many).before_removal_many([], []) == []
    assert await claims.drain(timeout=10)  # written: nothing held, every path asked, in one call
    calls.clear()
    again = Checks(None, claims, recheck_many=recheck_many).before_removal_many(keys, [k[1] for k in keys])
    assert again == [None, None, Dropped("no longer owed"), Dropped("no longer owed")]
    assert calls == [keys]
    await claims.close()


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
