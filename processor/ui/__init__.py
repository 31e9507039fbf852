"""`ckptlog ui`: a read-only web console over the state topic, the checkpoints topic and the DLQ."""

from __future__ import annotations

TOPIC_FLAGS = (("input", "events"), ("checkpoints", "checkpoints"), ("state", "state"), ("dlq", "dlq"))


def console_command(bootstrap: str, prefix: str, port: int = 8000) -> str:
    """The command serving the console over topics named `{prefix}.*` (what `ckptlog demo` prints),
    with the URL it serves."""
    flags = "".join(f" --{flag}-topic {prefix}.{suffix}" for flag, suffix in TOPIC_FLAGS)
    return f"ckptlog ui --bootstrap-servers {bootstrap}{flags} --port {port}  (then open http://127.0.0.1:{port}/)"
