"""The processor's output envelope (contract §5) and the one JSON encoder, down to the bytes.

Every CloudEvents record the processor writes — fold outputs, `checkpoints_missing`, and the
`deletion_completed` and `root_refused` facts it writes back to its input — is `encode_json(envelope(...))`.
`EnvelopeBuilder` produces exactly those bytes from pieces encoded once per run and type,
because the hot path builds ~3 envelopes per input event; tests hold it to the definition.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Generic, TypeVar

import msgspec
import pydantic_core

from ckptlog.events.decoded import INPUTS

PROCESSOR_SOURCE = "ckptlog/processor"
DELETION_COMPLETED = "deletion_completed"
DELETION_COMPLETED_VERSION = INPUTS[DELETION_COMPLETED].version
"""The version the processor writes back: the newest it reads (the input table's)."""
ROOT_REFUSED = "root_refused"
ROOT_REFUSED_VERSION = INPUTS[ROOT_REFUSED].version

_fast_json = msgspec.json.Encoder().encode
_exact_json = partial(pydantic_core.to_json, inf_nan_mode="constants")


def encode_json(value: Any) -> bytes:
    """Compact UTF-8 JSON with Python's NaN/Infinity literals (metrics may hold them).

    msgspec (~3x faster than pydantic-core) writes NaN/Infinity as `null`, so any value whose
    encoding holds `null` (a real None, a non-finite float, or just the text) is encoded again by
    pydantic-core, which keeps the literals. Float spelling differs between the two only in a
    positive exponent's `+` (1e16 vs 1e+16), never in value; the choice depends only on the value,
    so a replay gives the same bytes."""
    try:
        out = _fast_json(value)
    except (TypeError, ValueError, OverflowError):  # a type msgspec does not know: pydantic-core decides
        return _exact_json(value)
    return _exact_json(value) if out.count(b"null") else out


def output_id(topic: str, partition: int, offset: int, sequence: int) -> str:
    """Replay-stable: the same input record always yields the same output ids."""
    return f"ckptlog:{topic}:{partition}:{offset}:{sequence}"


_NUMBER = "(0|[1-9][0-9]{0,17})"
_OUTPUT_ID = re.compile(rf"ckptlog:([0-9A-Za-z._-]{{1,249}}):{_NUMBER}:{_NUMBER}:{_NUMBER}")


def parse_output_id(event_id: str) -> tuple[str, int, int, int] | None:
    """(topic, partition, offset, sequence) of an id `output_id` made, or None for any other id."""
    match = _OUTPUT_ID.fullmatch(event_id)
    if match is None:
        return None
    return match[1], int(match[2]), int(match[3]), int(match[4])


def restore_id(topic: str, partition: int, restored_at: int, run_id: str) -> str:
    """The id of an output made at a restore (not by an input record): the restore point names it."""
    return f"ckptlog:{topic}:{partition}:restored@{restored_at}:{run_id}"


def envelope(
    name: str,
    run_id: str,
    data: dict[str, Any],
    event_id: str,
    source: str = PROCESSOR_SOURCE,
    version: int = 1,
) -> dict[str, Any]:
    """CloudEvents 1.0 structured mode, in the one key order every output is written in."""
    return {
        "specversion": "1.0",
        "id": event_id,
        "source": source,
        "type": f"ckptlog.{name}.v{version}",
        "subject": run_id,
        "datacontenttype": "application/json",
        "data": data,
    }


Settled = Sequence[tuple[str, int]]
"""(path, eviction number) of evictions confirmed gone."""
Refused = Sequence[tuple[str, int, str]]
"""(path, eviction number, why) of evictions the deleter would not carry out."""


NEWLINE = "\n"


def deletion_completed_id(run_id: str, deleted: Settled, refused: Refused = ()) -> str:
    """A digest of the evictions it settles: a retried send of the same confirmations is a
    duplicate, while a path deleted again after it was reused (another eviction) is not."""
    entries = [f"{path}\x00{eviction}" for path, eviction in deleted]
    entries.sort()  # in place: no second list (one id per completion, hot in the dense workload)
    if refused:
        entries += sorted(f"{path}\x00{eviction}\x00refused" for path, eviction, _ in refused)
    return f"deleted:{run_id}:{hashlib.sha256(NEWLINE.join(entries).encode()).digest()[:16].hex()}"


def deletion_completed_data(deleted: Settled, refused: Refused = ()) -> dict[str, Any]:
    return {
        "deleted": [{"checkpoint_path": path, "eviction": eviction} for path, eviction in deleted],
        "refused": [{"checkpoint_path": p, "eviction": eviction, "reason": why} for p, eviction, why in refused],
    }


def root_refused_id(run_id: str, root: str) -> str:
    """The run and its root: the processor's second look at the same root (a publishing replay, an
    at_least_once batch folded again) writes the same fact, a duplicate."""
    return f"root_refused:{run_id}:{hashlib.sha256(root.encode()).hexdigest()[:32]}"


def root_refused_data(root: str, reason: str) -> dict[str, Any]:
    """The internal `ckptlog.root_refused` fact (contract §9 *Roots behind a symlink*)."""
    return {"storage_path": root, "reason": reason}


def deletion_completed_event(run_id: str, deleted: Settled, refused: Refused = ()) -> dict[str, Any]:
    """The internal `ckptlog.deletion_completed` input event (newest version) settling evictions of one run."""
    data = deletion_completed_data(deleted, refused)
    event_id = deletion_completed_id(run_id, deleted, refused)
    return envelope(DELETION_COMPLETED, run_id, data, event_id, version=DELETION_COMPLETED_VERSION)


_ID = b'{"specversion":"1.0","id":'
_DATA = b',"datacontenttype":"application/json","data":'
_SEQS = 16
_SEQ = [b'%d"' % seq for seq in range(_SEQS)]  # an output id's '{seq}"' ending
_RUN_CACHE_LIMIT = 100_000
_NO_HEADERS: tuple[tuple[str, bytes], ...] = ()
_new = tuple.__new__


class _Run:
    """One run's pieces: its Kafka key, and per type the JSON from the end of the id to the start of
    `data` (source, type, subject, datacontenttype), whether the envelope takes the exact path whatever
    its data (a piece holds the text `null`: encoding the whole envelope then takes pydantic-core's
    path) and, for fold outputs, the topic the output is routed to."""

    __slots__ = ("key", "middles", "others", "subject")

    def __init__(self, run_id: str) -> None:
        self.key, self.subject = run_id.encode(), encode_json(run_id)
        self.middles: dict[str, tuple[bytes, bool, str]] = {}  # fold outputs, by name
        self.others: dict[tuple[str, int], bytes] = {}  # any other envelope, by name and version


R = TypeVar("R", bound=tuple[Any, ...])
"""The caller's Kafka record type: a tuple (topic, key, value, headers, partition)."""


class EnvelopeBuilder(Generic[R]):
    """The envelopes of one input partition's records, as bytes: `encode_json(envelope(...))`, built
    from pieces encoded once (the partition's id prefix; per run and type the middle), so that per
    output only `data` is encoded. Output ids are `output_id(topic, partition, offset, sequence)`,
    sequence = the output's index among its input record's outputs.

    `outputs` appends finished records, keyed by run id, of the caller's
    record type `record` (a tuple type: topic, key, value, headers, partition; built with
    `tuple.__new__`: a NamedTuple's own `__new__` is a Python frame per record, and a second loop
    wrapping bytes into records cost a fifth of the hot path). `route(name)` says where an output
    goes and which version it is: its topic and version (the output table, ckptlog/events/outputs.py)."""

    def __init__(
        self,
        topic: str,
        partition: int,
        route: Callable[[str], tuple[str, int]],
        record: type[R],
        source: str = PROCESSOR_SOURCE,
    ) -> None:
        self._route, self._record = route, record
        self._source = encode_json(source)
        prefix = encode_json(output_id(topic, partition, 0, 0))  # '"ckptlog:{topic}:{partition}:0:0"', escaped
        self._id_prefix = _ID + prefix[:-4]  # without '0:0"'
        self._prefix_exact = bool(prefix.count(b"null"))
        self._runs: dict[str, _Run] = {}

    def outputs(
        self, run_id: str, offset: int, outputs: Sequence[tuple[str, dict[str, Any]]], into: list[R], first: int = 0
    ) -> None:
        """Append the records of one input record's `(name, data)` outputs, in order (hot path); `first`
        is the sequence of the first of them (a batch's coalesced watermark keeps its own, contract §5)."""
        run = self._runs.get(run_id) or self._run(run_id)
        key, middles, record = run.key, run.middles, self._record
        id_offset = b"%b%d:" % (self._id_prefix, offset)
        join, fast, append = b"".join, _fast_json, into.append
        for seq, (name, data) in enumerate(outputs, first):
            middle, exact, topic = middles.get(name) or self._output(run, name)
            try:  # encode_json(data), inlined: a call per output is a tenth of this loop
                body = fast(data)
            except (TypeError, ValueError, OverflowError):
                body = _exact_json(data)
            if exact or body.count(b"null"):  # not `in`: bytes.__contains__ tries an int first
                body = _exact_json(data)
            value = join((id_offset, _SEQ[seq] if seq < _SEQS else b'%d"' % seq, middle, body, b"}"))
            append(_new(record, (topic, key, value, _NO_HEADERS, None)))

    def encode(self, name: str, run_id: str, data: dict[str, Any], event_id: str, version: int = 1) -> bytes:
        """One envelope's bytes, with any id and version (deletion completions, outputs made at a restore)."""
        run = self._runs.get(run_id) or self._run(run_id)
        middle = run.others.get((name, version)) or run.others.setdefault(
            (name, version), self._middle(run, name, version)
        )
        event = encode_json(event_id)
        body = _exact_json(data) if (middle + event).count(b"null") else encode_json(data)
        return b"".join((_ID, event, middle, body, b"}"))

    def _run(self, run_id: str) -> _Run:
        if len(self._runs) >= _RUN_CACHE_LIMIT:
            self._runs.clear()
        run = self._runs[run_id] = _Run(run_id)
        return run

    def _middle(self, run: _Run, name: str, version: int) -> bytes:
        kind = encode_json(f"ckptlog.{name}.v{version}")
        return b',"source":%b,"type":%b,"subject":%b%b' % (self._source, kind, run.subject, _DATA)

    def _output(self, run: _Run, name: str) -> tuple[bytes, bool, str]:
        """A fold output's cached pieces: its middle, whether it must take the exact path, its topic."""
        topic, version = self._route(name)
        middle = self._middle(run, name, version)
        pieces = run.middles[name] = (middle, self._prefix_exact or bool(middle.count(b"null")), topic)
        return pieces
