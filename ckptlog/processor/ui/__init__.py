"""`ckptlog ui`: a read-only web console over the state topic, the checkpoints topic and the DLQ."""

from __future__ import annotations


def console_command(config: str, port: int = 8000, program: str = "ckptlog") -> str:
    """The command serving the console over the settings in the `--config` file `config` (what
    `ckptlog demo` prints; `program`: how to run ckptlog, ckptlog.processor.invocation), with its URL as a
    shell comment, so the line runs as printed."""
    return f"{program} ui --config {config} --port {port}  # then open http://127.0.0.1:{port}/"
