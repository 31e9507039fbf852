"""Issue 38 item 3: a printed hint names ckptlog as the user can run it — `ckptlog` only when the PATH
finds this very script, else the script's path (a real script in a real directory, run in a
subprocess so argv[0] is the script)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SHOW = (
    "from ckptlog.processor.invocation import activation_hint, ckptlog_command\n"
    "print(ckptlog_command()); print(activation_hint())"
)


def _venv_script(tmp_path: Path) -> Path:
    """A `ckptlog` console script in a virtualenv-like bin directory with an activate file."""
    bin_dir = tmp_path / "venv dir" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "activate").write_text("# activate\n")
    script = bin_dir / "ckptlog"
    script.write_text(f"#!{sys.executable}\n{SHOW}\n")
    script.chmod(0o755)
    return script


def _run(script: Path, path: str) -> list[str]:
    env = {**os.environ, "PATH": path, "PYTHONPATH": str(REPO)}
    return subprocess.run([str(script)], capture_output=True, text=True, env=env, check=True).stdout.splitlines()


def test_a_script_not_on_the_path_is_named_by_its_path_and_how_to_activate_it(tmp_path: Path) -> None:
    script = _venv_script(tmp_path)
    command, activate = _run(script, "/usr/bin:/bin")
    assert command == f"'{script}'", "absolute and shell-quoted: it runs from any directory"
    assert activate == f"source '{script.parent / 'activate'}'"


def test_a_script_the_path_finds_is_plain_ckptlog(tmp_path: Path) -> None:
    script = _venv_script(tmp_path)
    assert _run(script, f"{script.parent}:/usr/bin:/bin") == ["ckptlog", "None"]


def test_another_ckptlog_on_the_path_is_not_taken_for_this_one(tmp_path: Path) -> None:
    script = _venv_script(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "ckptlog").write_text("#!/bin/sh\necho old\n")
    (other / "ckptlog").chmod(0o755)
    assert _run(script, f"{other}:/usr/bin:/bin")[0] == f"'{script}'"
