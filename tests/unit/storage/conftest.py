"""The real tree the deletion-walk tests start from: a run root with a kept checkpoint, and precious
files outside it that no walk may touch."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def base(tmp_path: Path) -> Path:
    (tmp_path / "outside/victim").mkdir(parents=True)
    (tmp_path / "outside/victim/model.bin").write_bytes(b"precious")
    (tmp_path / "outside/file.bin").write_bytes(b"precious")
    (tmp_path / "runs/r1/kept").mkdir(parents=True)
    (tmp_path / "runs/r1/kept/model.bin").write_bytes(b"kept")
    return tmp_path
