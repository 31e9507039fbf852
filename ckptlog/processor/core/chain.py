"""Where a partition's snapshot chain stands (contract §6): its base, its newest object, what it weighs.

A chain is a base (a full snapshot) and the deltas written on it, each naming the base and its
predecessor by the SHA-256 of their bytes. `Chain` is what the processor needs to write the next
delta (the tip to name) and to decide when a new base is due; a restore rebuilds it from the
objects it read (core/delta.py `decode_chain`), so a processor continues the chain it restored from.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

DELTA_WEIGHT = 0.5
"""A new base is due once a chain's deltas weigh this much of its base: a restore then reads at most
(1 + DELTA_WEIGHT) times a full snapshot's bytes."""

FINAL_STRETCH = 2
"""A final snapshot (revocation, stop) is a delta on a chain up to this many times the bounds above."""


@dataclass(frozen=True, slots=True)
class Chain:
    base_offset: int  # the base's next_offset
    base_sha256: str  # hex digest of the base object's bytes
    base_bytes: int
    schema_version: int  # the base's: a delta is written only on a base of this build's schema
    tip_offset: int  # the newest object's next_offset (the base's, before any delta)
    tip_sha256: str
    deltas: int = 0  # deltas on the base up to the tip
    delta_bytes: int = 0

    @classmethod
    def based(cls, offset: int, sha256: str, size: int, schema_version: int) -> Chain:
        """A chain of one base."""
        return cls(offset, sha256, size, schema_version, offset, sha256)

    def extended(self, offset: int, sha256: str, size: int) -> Chain:
        """This chain with one more delta, the new tip."""
        return replace(
            self, tip_offset=offset, tip_sha256=sha256, deltas=self.deltas + 1, delta_bytes=self.delta_bytes + size
        )

    def takes_delta(self, max_deltas: int, schema_version: int, *, final: bool = False) -> bool:
        """Whether the next snapshot may be a delta on this chain: its base is of this build's schema,
        it holds fewer than `max_deltas` deltas, and they weigh less than `DELTA_WEIGHT` of the base.

        `final` (a revocation's or a stop's last snapshot, written while the group waits): compaction
        is not urgent then — the next owner's first snapshot is a base once the chain is past its
        bounds — so both bounds are stretched `FINAL_STRETCH` times; a chain restarted again and
        again still compacts, and a restore still reads at most ~(1 + 2 * DELTA_WEIGHT) bases."""
        if self.schema_version != schema_version:
            return False
        stretch = FINAL_STRETCH if final else 1
        return self.deltas < stretch * max_deltas and self.delta_bytes < stretch * DELTA_WEIGHT * self.base_bytes
