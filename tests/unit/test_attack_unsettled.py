"""Attack: evictions that are never settled (contract §7, §9: every evicted checkpoint is
eventually deleted, or settled as refused and reported; a deletion that fails is retried, then
every 30 s, for ever).

- A run id is 1 to 256 characters (contract §2), so up to 1,024 UTF-8 bytes, but a directory
  name is at most NAME_MAX = 255 bytes. `segment_problem` does not check the length, so an
  implicit run `{--storage-root}/{run id}` is created whose root no filesystem can hold: its
  claim fails with ENAMETOOLONG for ever (`root_claim_failed`, retried), and so does every
  deletion of its evictions (an error text, never None nor Refused), however many a hostile
  producer makes it evict.
- A checkpoint tree deeper than Python's recursion limit: `shutil.rmtree(dir_fd=…)` recurses
  once per level, raises RecursionError, and `_remove_one` turns it into an error text: retried
  for ever, never settled.
"""

from __future__ import annotations

import os
from pathlib import Path

from ckptlog.events.decoded import CheckpointConfig
from ckptlog.events.paths import normalize
from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.storage.claim_writer import claim_all
from ckptlog.processor.storage.claims import Claimant
from ckptlog.processor.storage.safety import Refused
from ckptlog.processor.storage.tree import remove_all
from tests import factories as f

LONG_ID = "é" * 200  # 200 characters (within contract §2's 256), 400 UTF-8 bytes (over NAME_MAX)


def test_an_implicit_run_id_longer_than_a_directory_name_is_refused() -> None:
    settings = FoldSettings(
        default_config=CheckpointConfig(num_to_keep=1), default_root="file:///sr", outer_root="file:///sr"
    )
    fold = Fold(settings)
    effects = fold.apply(f.event(f.report(LONG_ID, {}, f"file:///sr/{LONG_ID}/c1")))
    assert effects.rejection is not None and effects.rejection.reason == "unsafe_storage_root", (
        f"run id of {len(LONG_ID.encode())} bytes accepted with root {fold.runs[LONG_ID].storage_root[:40]}…"
    )


def test_a_root_longer_than_a_directory_name_is_never_claimed_nor_settled(tmp_path: Path) -> None:
    outer = normalize(f"file://{tmp_path}/sr")
    root = f"{outer}/{LONG_ID}"
    (tmp_path / "sr").mkdir()
    claimed = claim_all([(root, Claimant(LONG_ID))], outer, {})
    deleted = remove_all([(f"{root}/c1", root, Claimant(LONG_ID))], {}, outer)
    # nothing can exist there: "gone" (None) or a final refusal would settle it; a text is retried for ever
    assert all(o is None or isinstance(o, Refused) for o in claimed + deleted), (claimed, deleted)


def _remove_deep(top: Path) -> None:
    """Remove a tree of any depth without recursion (pytest's own tmp cleanup would hit the limit too)."""
    stack = [str(top)]
    while stack:
        entries = list(os.scandir(stack[-1]))
        dirs = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                os.unlink(entry.path)
        if dirs:
            stack.extend(dirs)
        else:
            os.rmdir(stack.pop())


def test_a_checkpoint_deeper_than_the_recursion_limit_is_never_settled(tmp_path: Path) -> None:
    ckpt = tmp_path / "sr" / "a" / "ckpt-1"
    ckpt.mkdir(parents=True)
    fd = os.open(ckpt, os.O_RDONLY)
    for _ in range(1200):  # what a training job may write inside its own checkpoint
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
    os.close(fd)
    outer = normalize(f"file://{tmp_path}/sr")
    try:
        outcomes = remove_all([(normalize(f"file://{ckpt}"), f"{outer}/a", Claimant("a"))], {}, outer)
    finally:
        if ckpt.exists():
            _remove_deep(ckpt)
    assert all(o is None or isinstance(o, Refused) for o in outcomes), outcomes
