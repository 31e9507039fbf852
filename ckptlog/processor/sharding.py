"""Routing JSON lines to shards by run id without parsing them.

`Shards.route()` finds the run id with a byte search; it answers only when that is certain —
no backslash anywhere in the line (so no escaped key or value) and exactly one `"subject"`
key — and says AMBIGUOUS otherwise, in which case every shard decodes the line and keeps it
only if the decoded run id is its own (`Shards.of_run`). The hash is CRC-32 of the UTF-8 run id,
the same bytes in both paths.

CRC-32 alone splits a handful of runs unevenly (10 runs went 6/4 over two shards), so
`plan()` first counts the lines per run in a sample of the file (its head) and hands runs out
largest first to the least-loaded shard; runs not in the sample fall back to CRC-32. Any
assignment is correct as long as every shard uses the same one: runs are independent.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping

AMBIGUOUS = -1
_KEY = b'"subject"'
_VALUE = re.compile(rb'[ \t\r\n]*:[ \t\r\n]*"([^"]*)"')  # JSON whitespace, the colon, the string


def subject_bytes(raw: bytes) -> bytes | None:
    """The run id's UTF-8 bytes found by a byte search, or None when that cannot be sure."""
    at = raw.find(_KEY)
    if at < 0 or raw.find(0x5C) >= 0 or raw.find(_KEY, at + 9) >= 0:  # 0x5C: a backslash (find beats `in`)
        return None
    value = _VALUE.match(raw, at + 9)  # no backslash anywhere: the value ends at the next quote
    return None if value is None else value.group(1)


class Shards:
    """Which of `count` shards owns a run: the planned one, else CRC-32 of the run id."""

    __slots__ = ("count", "planned")

    def __init__(self, count: int, planned: Mapping[bytes, int] | None = None) -> None:
        self.count = count
        self.planned = dict(planned or {})

    def of_run(self, run_id: str) -> int:
        key = run_id.encode()
        owner = self.planned.get(key)
        return owner if owner is not None else zlib.crc32(key) % self.count

    def route(self, raw: bytes) -> int:
        """The shard owning this line's run, or AMBIGUOUS when a byte search cannot be sure."""
        subject = subject_bytes(raw)
        if subject is None:
            return AMBIGUOUS
        owner = self.planned.get(subject)
        return owner if owner is not None else zlib.crc32(subject) % self.count


def plan(sample: Iterable[bytes], count: int) -> Shards:
    """Balance the runs seen in `sample` over `count` shards by their line counts."""
    lines = Counter(s for s in map(subject_bytes, sample) if s is not None)
    loads = [0] * count
    planned = {}
    for subject, n in sorted(lines.items(), key=lambda item: (-item[1], item[0])):
        owner = loads.index(min(loads))
        planned[subject] = owner
        loads[owner] += n
    return Shards(count, planned)
