"""The storage tree (storage/tree.py) after local and remote walks became one: the same layout gets
the same verdict on a local directory and in fsspec's memory filesystem, and what only one side can
get wrong — the backend's own spelling of a path, a FIFO where the look steps — is refused or passed by."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from ckptlog.events.paths import CLAIM_DIR, normalize
from ckptlog.processor.storage.claim_writer import claim_all
from ckptlog.processor.storage.claims import Claimant, claim_body, claim_name
from ckptlog.processor.storage.links import link_on_the_way
from ckptlog.processor.storage.safety import Outcome, Refused
from ckptlog.processor.storage.tree import remove_all

A, B = Claimant("a", "t[0]"), Claimant("b", "t[1]")


class Layout:
    """`{base}/team/a/{c0,sub/c1}` with files, on a local directory or in the memory filesystem."""

    def __init__(self, tmp_path: Path, protocol: str) -> None:
        self.protocol = protocol
        if protocol == "file":
            self.base, self.outer = str(tmp_path / "sr"), normalize(f"file://{tmp_path}/sr")
        else:
            self.base, self.outer = f"/tree-{tmp_path.name}", f"memory://tree-{tmp_path.name}"
        for rel in ("team/a/c0/model.bin", "team/a/c0/optim/state.bin", "team/a/sub/c1/model.bin"):
            self.write(rel, b"data")

    def write(self, rel: str, data: bytes) -> None:
        if self.protocol == "file":
            Path(self.base, rel).parent.mkdir(parents=True, exist_ok=True)
            Path(self.base, rel).write_bytes(data)
        else:
            fsspec.filesystem("memory").pipe_file(f"{self.base}/{rel}", data)

    def claim(self, rel: str, me: Claimant) -> None:
        self.write(f"{rel}/{CLAIM_DIR}/{claim_name(me)}".lstrip("/"), claim_body(me))

    def exists(self, rel: str) -> bool:
        if self.protocol == "file":
            return Path(self.base, rel).exists()
        return bool(fsspec.filesystem("memory").exists(f"{self.base}/{rel}"))

    def remove(self, rel: str) -> Outcome:
        (outcome,) = remove_all([(f"{self.outer}/{rel}", f"{self.outer}/team/a", A)], {}, self.outer)
        return outcome


@pytest.fixture(params=["file", "memory"])
def layout(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Layout]:
    made = Layout(tmp_path, request.param)
    yield made
    if made.protocol == "memory":
        fsspec.filesystem("memory").rm(made.base, recursive=True)


# (where another claimant's claim is planted, or None; the checkpoint removed; removed?, retried?)
CASES = [
    (None, "team/a/c0", True, False),
    ("", "team/a/c0", False, False),  # on --storage-root itself: every root lies inside b's
    ("team", "team/a/c0", False, False),  # above a's root
    ("team/a", "team/a/c0", False, False),  # at a's root
    ("team/a/sub", "team/a/sub/c1", False, False),  # between the root and the checkpoint
    ("team/a/c0/optim", "team/a/c0", False, False),  # inside the checkpoint
    ("team/a/sub/c1", "team/a/c0", True, False),  # beside it: not on its way, not in it
]


@pytest.mark.parametrize(("planted", "ckpt", "removed", "retry"), CASES)
def test_local_and_remote_trees_give_one_verdict_per_layout(
    layout: Layout, planted: str | None, ckpt: str, removed: bool, retry: bool
) -> None:
    assert claim_all([(f"{layout.outer}/team/a", A)], layout.outer, {}) == [None]
    if planted is not None:
        layout.claim(planted, B)
    outcome = layout.remove(ckpt)
    if removed:
        assert outcome is None and not layout.exists(ckpt)
    else:
        assert isinstance(outcome, Refused) and outcome.retry is retry, outcome
        assert "'b' (t[1])" in outcome.reason and layout.exists(f"{ckpt}/model.bin")


def test_an_empty_claim_directory_on_the_way_is_retried_on_both_trees(layout: Layout) -> None:
    assert claim_all([(f"{layout.outer}/team/a", A)], layout.outer, {}) == [None]
    if layout.protocol == "file":
        Path(layout.base, "team/a/sub", CLAIM_DIR).mkdir()
    else:
        layout.write(f"team/a/sub/{CLAIM_DIR}/.tmp-unfinished", b"")  # an object store has no empty directory
    outcome = layout.remove("team/a/sub/c1")
    assert isinstance(outcome, Refused) and outcome.retry and layout.exists("team/a/sub/c1/model.bin")


class MisspellingFS(MemoryFileSystem):  # type: ignore[misc]  # fsspec is untyped
    """A memory filesystem whose own spelling of a path is not the canonical one: it drops a last
    segment named `drop` (so the checkpoint's spelling is its root's) and folds case elsewhere."""

    protocol = "misspell"
    store: ClassVar[dict[str, Any]] = {}
    pseudo_dirs: ClassVar[list[str]] = [""]

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        spelled = str(super()._strip_protocol(str(path).removeprefix("misspell://")))
        return spelled.removesuffix("/drop").lower()


@pytest.mark.parametrize("ckpt", ["drop", "C1"])
def test_a_backend_spelling_a_checkpoint_elsewhere_than_below_its_root_is_refused(ckpt: str) -> None:
    fsspec.register_implementation("misspell", MisspellingFS, clobber=True)
    fs = MisspellingFS()
    for rel in ("runs/a/keep/model.bin", "runs/a/c1/model.bin", "runs/a/drop/model.bin"):
        fs.pipe_file(f"/{rel}", b"kept")
    try:
        (outcome,) = remove_all([(f"misspell://runs/a/{ckpt}", "misspell://runs/a", A)], {}, "misspell://runs")
        assert isinstance(outcome, Refused) and not outcome.retry and "spells" in outcome.reason, outcome
        assert sorted(fs.find("/runs")) == ["/runs/a/c1/model.bin", "/runs/a/drop/model.bin", "/runs/a/keep/model.bin"]
    finally:
        MisspellingFS.store.clear()  # its own store: `rm` would meet its own misspellings
        MisspellingFS.pseudo_dirs[:] = [""]


def test_the_root_look_passes_a_fifo_on_the_way_without_blocking_and_names_a_link(tmp_path: Path) -> None:
    """The look at a new root is the deleter's own walk now (LocalDir.child): a FIFO where a directory
    should be is opened with O_DIRECTORY, never waited on; a link beside it is still named."""
    sr = tmp_path / "sr"
    sr.mkdir()
    os.mkfifo(sr / "fifo")
    (sr / "link").symlink_to(tmp_path, target_is_directory=True)
    outer = normalize(f"file://{sr}")
    seen: list[str | None] = []
    looker = threading.Thread(target=lambda: seen.append(link_on_the_way(f"{outer}/fifo/a", outer)), daemon=True)
    looker.start()
    looker.join(timeout=5)
    assert seen == [None], "the look blocked on a FIFO"
    assert link_on_the_way(f"{outer}/link/a", outer) == f"{outer}/link is a symlink (to {str(tmp_path)!r})"
