"""`ckptlog ui` refuses a host beyond loopback without a token, before it connects anywhere."""

from __future__ import annotations

import subprocess
import sys


def test_a_public_host_without_a_token_is_refused_with_a_clear_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ckptlog.cli", "ui", "--host", "0.0.0.0", "--bootstrap-servers", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "CKPTLOG_UI_TOKEN": ""},
    )
    assert done.returncode != 0
    assert "give a token" in done.stderr and "Traceback" not in done.stderr


def test_the_demo_names_the_console_command() -> None:
    from ckptlog.processor.ui import console_command

    command = console_command("/tmp/ckptlog-demo-ab/ckptlog.toml", program="/v/bin/ckptlog")
    assert command.startswith("/v/bin/ckptlog ui --config /tmp/ckptlog-demo-ab/ckptlog.toml --port 8000")
    assert "http://127.0.0.1:8000/" in command
