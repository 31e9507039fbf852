"""Structured event ids (contract §3 *Deduplication*): `ck1:{producer}:{sequence}:{run}`.

An id in this form names a *producer* of one run (a kind and its fields, e.g. the Reporter's
reports of generation 2: `r:2`) and the event's *sequence* number within it (the report's index
in that generation). The fold remembers such ids as ranges of sequence numbers per producer
instead of one string each, which is what keeps a long-lived run's deduplication in kilobytes.
Any producer may use the form (it is part of the contract); an id not in it is *foreign* and is
remembered as itself.

The grammar is strict and every id has one spelling, so an id maps to exactly one (producer,
sequence) and back: numbers are ASCII decimal without leading zeros and below 10**18; the run
at the end must be the event's own `subject`; a kind has a fixed number of fields, each of a
fixed alphabet (no `:`). Anything else, however close, is foreign.

| kind | fields | sequence | sent by |
|---|---|---|---|
| `r` | generation | index within the generation | `Reporter.report` |
| `a` | attempt (`[0-9A-Za-z_-]{1,64}`), generation | index within the generation | trainer integrations |
| `ad` | — | Ray's report index | `ckptlog adopt-ray` |
| `g` | — | the generation the restart starts | `Reporter.worker_group_restart` |
| `v` | the request's topic, partition and output sequence | the request's offset | `Evaluator` |
"""

from __future__ import annotations

import re

PREFIX = "ck1:"
_NUMBER = r"(?:0|[1-9][0-9]{0,17})"  # below 10**18: an int64, one spelling
_FIELDS = {"number": _NUMBER, "attempt": r"[0-9A-Za-z_-]{1,64}", "topic": r"[0-9A-Za-z._-]{1,249}"}
KINDS: dict[str, tuple[str, ...]] = {
    "r": ("number",),
    "a": ("attempt", "number"),
    "ad": (),
    "g": (),
    "v": ("topic", "number", "number"),
}
"""Each kind and its fields (names of `_FIELDS`), in the order they are written."""

_PRODUCER = "|".join(re.escape(kind) + "".join(f":{_FIELDS[f]}" for f in fields) for kind, fields in KINDS.items())
_ID = re.compile(rf"{re.escape(PREFIX)}({_PRODUCER}):({_NUMBER}):")
_PRODUCER_ONLY = re.compile(_PRODUCER)
_FIELD = {name: re.compile(pattern) for name, pattern in _FIELDS.items()}


def structured_id(run_id: str, kind: str, fields: tuple[str | int, ...], sequence: int) -> str:
    """The id of event `sequence` of producer (`kind`, `fields`) of run `run_id`; ValueError for
    values outside the grammar (the caller then names the event another way)."""
    names = KINDS.get(kind)
    if names is None or len(names) != len(fields):
        raise ValueError(f"structured id: kind {kind!r} takes the fields {names}, got {fields!r}")
    for name, value in (*zip(names, fields, strict=True), ("number", sequence)):
        if isinstance(value, bool) or not _FIELD[name].fullmatch(str(value)):
            raise ValueError(f"structured id: {name} {value!r} is outside the grammar")
    return PREFIX + ":".join([kind, *map(str, fields), str(sequence), run_id])


def parse(event_id: str, run_id: str) -> tuple[str, int] | None:
    """(producer, sequence) of a structured id of run `run_id`, or None for any other id."""
    if not event_id.startswith(PREFIX) or not event_id.endswith(run_id):
        return None
    match = _ID.fullmatch(event_id, 0, len(event_id) - len(run_id))
    if match is None:
        return None
    return match[1], int(match[2])


def render(producer: str, sequence: int, run_id: str) -> str:
    """The id `parse` read as (producer, sequence) of run `run_id`."""
    return f"{PREFIX}{producer}:{sequence}:{run_id}"


def is_producer(producer: str) -> bool:
    """Whether `producer` is one the grammar spells (a snapshot's marks are checked with it)."""
    return _PRODUCER_ONLY.fullmatch(producer) is not None
