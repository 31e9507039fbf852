"""The processor's look for a symlink between `--storage-root` and a run root (contract §9 *Roots
behind a symlink*), on a real directory tree: what it reports, what it leaves alone, and that the
deleter still refuses a link that appears after the look.

The tree: `tmp/bound` (the --storage-root), `tmp/bound/real/r1` a run root with a kept checkpoint,
`tmp/outside/victim` what an attacker would like deleted.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from ckptlog.processor.storage import links
from ckptlog.processor.storage.deletion import Deleter, RetryPolicy
from ckptlog.processor.storage.links import link_on_the_way, look
from tests.unit.storage.test_deletion_symlinks import tree


@pytest.fixture
def base(tmp_path: Path) -> Path:
    (tmp_path / "outside/victim").mkdir(parents=True)
    (tmp_path / "outside/victim/model.bin").write_bytes(b"precious")
    (tmp_path / "bound/real/r1/kept").mkdir(parents=True)
    (tmp_path / "bound/real/r1/kept/model.bin").write_bytes(b"kept")
    return tmp_path


def url(base: Path, rel: str = "") -> str:
    return f"file://{base}/bound" + (f"/{rel}" if rel else "")


def seen(base: Path, rel: str) -> str | None:
    return link_on_the_way(url(base, rel), url(base))


def test_a_plain_directory_and_a_root_not_made_yet_hold_no_link(base: Path) -> None:
    assert seen(base, "real/r1") is None
    assert seen(base, "real/r1/kept") is None
    assert seen(base, "not-yet/r2") is None  # nothing below a missing directory can be a link yet
    assert seen(base, "real/not-yet") is None


def test_the_root_itself_a_symlink(base: Path) -> None:
    (base / "bound/r2").symlink_to(base / "outside", target_is_directory=True)
    assert seen(base, "r2") == f"{url(base, 'r2')} is a symlink (to {str(base / 'outside')!r})"


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_a_directory_between_the_bound_and_the_root_a_symlink(base: Path, depth: int) -> None:
    parent = base / "bound" / "/".join(["a", "b"][:depth])
    parent.mkdir(parents=True, exist_ok=True)
    (parent / "link").symlink_to(base / "outside", target_is_directory=True)
    rel = "/".join([*["a", "b"][:depth], "link"])
    assert seen(base, f"{rel}/victim") == f"{url(base, rel)} is a symlink (to {str(base / 'outside')!r})"
    assert seen(base, f"{rel}/missing/deeper") is not None  # reached through the link, made or not


def test_a_link_into_another_runs_root_and_a_relative_link(base: Path) -> None:
    (base / "bound/alias").symlink_to(base / "bound/real/r1", target_is_directory=True)
    (base / "bound/rel").symlink_to("real")
    assert seen(base, "alias/sub") == f"{url(base, 'alias')} is a symlink (to {str(base / 'bound/real/r1')!r})"
    assert seen(base, "rel/r1") == f"{url(base, 'rel')} is a symlink (to 'real')"


def test_a_symlink_loop_and_a_dangling_link(base: Path) -> None:
    (base / "bound/loop").symlink_to("loop")
    (base / "bound/a").symlink_to("b")
    (base / "bound/b").symlink_to("a")
    (base / "bound/dangling").symlink_to(base / "gone")
    assert seen(base, "loop/x") == f"{url(base, 'loop')} is a symlink (to 'loop')"
    assert seen(base, "a/x") == f"{url(base, 'a')} is a symlink (to 'b')"
    assert seen(base, "dangling") == f"{url(base, 'dangling')} is a symlink (to {str(base / 'gone')!r})"


def test_a_file_in_the_way_is_no_link(base: Path) -> None:
    (base / "bound/file").write_bytes(b"x")
    assert seen(base, "file/r") is None  # the claim and the deleter refuse it on their own


def test_the_bound_itself_is_trusted_and_resolved(base: Path) -> None:
    """A --storage-root that is itself a link is resolved and trusted, as the deleter trusts it."""
    (base / "alias-bound").symlink_to(base / "bound", target_is_directory=True)
    bound = f"file://{base}/alias-bound"
    assert link_on_the_way(f"{bound}/real/r1", bound) is None
    assert link_on_the_way(bound, bound) is None  # the bound itself is no root below it
    (base / "bound/l").symlink_to(base / "outside", target_is_directory=True)
    assert link_on_the_way(f"{bound}/l/x", bound) == f"{bound}/l is a symlink (to {str(base / 'outside')!r})"


def test_a_root_outside_the_bound_or_a_missing_bound_is_not_looked_at(base: Path) -> None:
    (base / "outside/l").symlink_to(base / "outside/victim", target_is_directory=True)
    assert link_on_the_way(f"file://{base}/outside/l", url(base)) is None  # the fold refuses it: path_outside_root
    assert link_on_the_way(f"file://{base}/bound-sibling/x", url(base)) is None  # a prefix, not a directory above
    assert link_on_the_way(f"file://{base}/nowhere/x", f"file://{base}/nowhere") is None


@pytest.mark.parametrize(
    "outer", ["{base}/bound", "{base}/bound/", "file://{base}//bound", "local://{base}/bound", "file://{base}/./bound"]
)
async def test_look_takes_the_bound_in_any_spelling_the_setting_may_have(base: Path, outer: str) -> None:
    (base / "bound/l").symlink_to(base / "outside", target_is_directory=True)
    claims = [(url(base, "l/r2"), "r2"), (url(base, "real/r1"), "r1")]
    found = await look(claims, outer.format(base=base))
    assert found == {(url(base, "l/r2"), "r2"): f"{url(base, 'l')} is a symlink (to {str(base / 'outside')!r})"}


async def test_no_bound_and_other_protocols_are_never_looked_at(base: Path) -> None:
    (base / "bound/l").symlink_to(base / "outside", target_is_directory=True)
    assert await look([(url(base, "l/r2"), "r2")], None) == {}  # the deleter resolves and trusts the run root
    assert await look([("s3://bucket/runs/r2", "r2")], "s3://bucket/runs") == {}
    assert await look([("memory://runs/r2", "r2")], "memory://runs") == {}
    assert await look([(url(base, "l/r2"), "r2")], "s3://bucket/runs") == {}  # not below that bound


async def test_a_storage_that_does_not_answer_in_time_is_not_waited_for(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (base / "bound/l").symlink_to(base / "outside", target_is_directory=True)
    real = links.links_on_the_way

    def slow(claims: list[tuple[str, str]], outer: str) -> dict[tuple[str, str], str]:
        import time

        time.sleep(0.5)
        return real(claims, outer)

    monkeypatch.setattr(links, "links_on_the_way", slow)
    assert await look([(url(base, "l/r2"), "r2")], url(base), timeout_s=0.05) == {}


async def test_a_link_made_after_the_look_still_stops_every_deletion(base: Path) -> None:
    """The look found nothing (the run was accepted); a link planted later is met by the deleter's own
    walk, which never follows one: nothing outside is touched, the eviction is refused."""
    root = url(base, "real/r1")
    assert await look([(root, "r1")], url(base)) == {}
    (base / "bound/real/r1/ckpt").mkdir()
    os.rename(base / "bound/real", base / "bound/moved")
    (base / "bound/real").symlink_to(base / "outside", target_is_directory=True)
    (base / "outside/ckpt").mkdir()
    (base / "outside/ckpt/model.bin").write_bytes(b"precious")
    before = tree(base)
    refused: list[tuple[tuple[str, str], str]] = []
    deleter = Deleter(
        outer_root=url(base), retry=RetryPolicy(max_attempts=2, base_delay=0.001), on_refused=refused.extend
    )
    assert deleter.submit("r1", f"{root}/ckpt", root)
    await asyncio.wait_for(deleter.drain(timeout=10), 20)
    assert tree(base) == before
    assert deleter.outstanding == frozenset() and len(refused) == 1 and "symlink" in refused[0][1]
    assert await look([(root, "r1")], url(base)) != {}  # a look now would see it


async def test_a_look_that_fails_writes_no_fact_and_does_not_raise(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (base / "bound/l").symlink_to(base / "outside", target_is_directory=True)

    def broken(claims: list[tuple[str, str]], outer: str) -> dict[tuple[str, str], str]:
        raise ValueError("a fault of the look")

    monkeypatch.setattr(links, "links_on_the_way", broken)
    assert await look([(url(base, "l/r2"), "r2")], url(base)) == {}
