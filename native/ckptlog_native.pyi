"""Type stubs for the compiled fold engine (native/src/lib.rs); driven by processor/native.py."""

from collections.abc import Callable
from typing import Any

class Unsupported(Exception):
    """The file needs the Python fold (e.g. an int score beyond 2**53)."""

class NativeFold:
    def __init__(
        self,
        support: Any,
        defaults: tuple[int | None, str | None, bool, str | None, str, int],
        max_bytes: int,
        fast: bool,
        shard: tuple[int, int, dict[bytes, int]] | None = None,
    ) -> None: ...
    def feed_file(self, path: str, progress: Callable[[int, int], None] | None = None, mask: int = 65535) -> None: ...
    def feed_lines(self, lines: list[bytes]) -> None: ...
    def result(
        self, with_deletions: bool, as_text: bool = False
    ) -> tuple[list[tuple[int, str, Any]], list[dict[str, Any]], list[tuple[str, str, str]], int, int]: ...

def dumps_metrics(text: str) -> str | None: ...
def dumps_float(x: float) -> str: ...
def time_ok(s: str) -> bool: ...
def dumps_str(s: str) -> str: ...
