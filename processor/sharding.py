"""Routing JSON lines to shards by run id without parsing them.

`route()` finds the run id with a byte search; it answers only when that is certain —
no backslash anywhere in the line (so no escaped key or value) and exactly one `"subject"`
key — and says AMBIGUOUS otherwise, in which case every shard decodes the line and keeps it
only if the decoded run id is its own (`shard_of`). The hash is CRC-32 of the UTF-8 run id,
the same bytes in both paths.
"""

from __future__ import annotations

import zlib

AMBIGUOUS = -1
_KEY = b'"subject"'
_SPACE = b" \t\r\n"


def shard_of(run_id: str, shards: int) -> int:
    return zlib.crc32(run_id.encode()) % shards


def route(raw: bytes, shards: int) -> int:
    """The shard owning this line's run, or AMBIGUOUS when a byte search cannot be sure."""
    at = raw.find(_KEY)
    if at < 0 or b"\\" in raw or raw.find(_KEY, at + 9) >= 0:
        return AMBIGUOUS
    end = len(raw)
    i = at + 9
    while i < end and raw[i] in _SPACE:
        i += 1
    if i == end or raw[i] != 0x3A:  # ':'
        return AMBIGUOUS
    i += 1
    while i < end and raw[i] in _SPACE:
        i += 1
    if i == end or raw[i] != 0x22:  # '"'
        return AMBIGUOUS
    close = raw.find(b'"', i + 1)
    if close < 0:
        return AMBIGUOUS
    return zlib.crc32(raw[i + 1:close]) % shards
