"""Incremental snapshots (contract §6): deltas on a base, taken without stopping the fold, and restored.

A **delta** holds what changed in a partition's state since the previous object of its chain (the
base, or the delta before it): the records of the runs changed (`run_entry`, the unit a base writes
too, whatever a run's record holds), the runs gone, and the same for each keyed table beside the
runs (`TABLES`), plus the offset, the settings and its links: the base and the previous object, each
by offset and the SHA-256 of its bytes, and its sequence number on the base.

Per table a delta is `{"drop": [keys], "put": {key: value}}`, applied as `table.pop(key)` for each
dropped key, then `table.update(put)`. That rebuilds the table's order as well as its content,
because the fold's tables are dicts: a key changed in place keeps its position, a key inserted since
the previous snapshot sits after every key that was never removed. So the keys inserted since then
form a tail of the table made of changed keys only; `changes` drops and puts back the longest tail
of changed keys (in its order) and puts the other changed keys in place. Which keys changed is
`Fold.changed`, one set of run ids for every table: every event's subject (whatever it moves between
the tables: a retirement from `runs` to `finished` and `retired`, a reopen back, a `root_refused`
fact from `runs` to `symlinked`, a forget dropping a retired state), and the records a retirement
expires from `finished` and `retired` (finishing.py `expire`) or a restore drops past the bound
(`Fold`); a superset only makes a delta larger, never wrong. The `retired` states are held encoded
(`HELD_ENCODED`) and written as they are.

A `Capture` takes the state of one moment: the changed (or, for a base, every) run and the tables'
entries, then encodes one run per `step` while the fold goes on. Before the fold changes a run not
yet encoded it calls `Fold.watch`, and the capture encodes that run first: copy on write, per run.

A base encodes only what a delta would: the runs changed since the previous snapshot. The others'
entries are the bytes the previous snapshots encoded them to, kept in `Encodings` (contract §6
*Encodings kept*): an entry kept equals `run_entry` of its run's current state unless the run is in
`Fold.changed`, the rule a delta's correctness rests on already.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from types import GenericAlias
from typing import TYPE_CHECKING, Any

from ckptlog.errors import SnapshotCorrupt
from ckptlog.processor.core.chain import Chain
from ckptlog.processor.core.run_codec import ENTRIES
from ckptlog.processor.core.settings_codec import settings_out
from ckptlog.processor.core.snapshot import (
    DELTA_FORMAT,
    FORMAT,
    Raw,
    Snapshot,
    body_fields,
    compose,
    entries,
    opened,
    retired_entries,
    run_entry,
    seal,
    snapshot_in,
    typed_envelope,
)
from ckptlog.processor.core.state import RunState

if TYPE_CHECKING:
    from ckptlog.processor.core.fold import Fold

TABLES = ("refused", "finished", "symlinked", "retired")
"""The partition's keyed tables beside `runs`, in the order a base (core/snapshot.py `body_fields`)
writes them whole and a delta writes their changes."""

HELD_ENCODED = {"retired": retired_entries}
"""The tables whose values the fold holds encoded already (bytes): written as they are, not again."""

DELTA_ENVELOPE = typed_envelope(
    "delta",
    (
        "processor_version",
        "topic",
        "partition",
        "next_offset",
        "base",
        "previous",
        "sequence",
        "settings",
        "runs",
        *TABLES,
    ),
    GenericAlias(dict, (str, ENTRIES | list[Any])),  # {"drop": [run ids], "put": {run id: entry}}
)
"""A delta as `opened` decodes it in one pass (`_delta_fields` writes it): its changed runs typed."""


def tables_of(fold: Fold) -> dict[str, dict[str, Any]]:
    return {"refused": fold.refused, "finished": fold.finished, "symlinked": fold.symlinked, "retired": fold.retired}


def changes(table: dict[str, Any], changed: dict[str, None]) -> tuple[list[str], list[str]]:
    """`(drop, put)` that turn `table` as it was at the previous snapshot into `table` as it is, given
    the keys `changed` since (see the module docstring); O(changed keys)."""
    tail: list[str] = []
    for key in reversed(table):
        if key not in changed:
            break
        tail.append(key)
    tail.reverse()
    moved = set(tail)
    drop = [key for key in changed if key not in table or key in moved]
    return drop, [key for key in changed if key in table and key not in moved] + tail


class Encodings:
    """The entries (`run_entry`) the runs of one fold were last encoded to by its snapshots, for the
    next base to write as they are (contract §6 *Encodings kept*).

    Rule: an entry held equals `run_entry` of its run's state now unless the run is in `fold.changed`;
    so a capture `take`s them less the runs changed, and `keep`s back the ones it holds once its runs
    are encoded (each of the moment it was taken: what changed since is in `fold.changed` again).
    Entries are of one fold, one that tracks its changes (without `Fold.changed` nothing says which
    are stale): another fold takes none. Until a capture keeps them back, the next takes none."""

    def __init__(self) -> None:
        self._fold: Fold | None = None
        self._entries: dict[str, bytes] = {}

    def take(self, fold: Fold, changed: dict[str, None]) -> dict[str, bytes]:
        """The entries still equal to their runs' state: none for another fold, none of a run in `changed`."""
        entries, self._entries = self._entries, {}
        if fold is not self._fold or fold.changed is None:
            return {}
        for run_id in changed:
            entries.pop(run_id, None)
        return entries

    def keep(self, fold: Fold, entries: dict[str, bytes]) -> None:
        if fold.changed is not None:
            self._fold, self._entries = fold, entries

    def __len__(self) -> int:
        return len(self._entries)


class Capture:
    """One snapshot of `fold` at this moment: a base (`on` None) or a delta on the chain `on`.

    Every run to write is encoded by `step` (one at a time) or, if the fold is about to change it
    first, by `before_change` (installed as `Fold.watch` until the last run is encoded); a base takes
    the entries of the runs unchanged since the previous snapshot from `kept`, as they are."""

    def __init__(
        self,
        fold: Fold,
        topic: str,
        partition: int,
        next_offset: int,
        on: Chain | None,
        kept: Encodings | None = None,
    ) -> None:
        if on is not None and fold.changed is None:
            raise ValueError("a delta needs a fold that tracks its changes (Fold(track_changes=True))")
        self.changed = fold.changed or {}
        self.kept, self._known = kept, ({} if kept is None else kept.take(fold, self.changed))
        if fold.changed is not None:
            fold.changed = {}  # from now on: what the next snapshot writes
        self.on, self.fold = on, fold
        self.head = Snapshot(topic, partition, next_offset, fold.settings)
        self.drop: list[str] = []
        self.tables: dict[str, tuple[list[str], dict[str, Any]]] = {}
        self.pieces: dict[str, bytes] = {}
        self._pending: dict[str, RunState]
        if on is None:
            self._base(fold)
        else:
            self.drop, self.order = changes(fold.runs, self.changed)
            for name, table in tables_of(fold).items():
                drop, put = changes(table, self.changed)
                self.tables[name] = (drop, {key: table[key] for key in put})
            self._pending = {run_id: fold.runs[run_id] for run_id in self.order}
        self._next = iter(list(self._pending))
        fold.watch = self.before_change

    def _base(self, fold: Fold) -> None:
        """Every run: those kept taken as they are, the others to encode; copies made in C (a few ms at
        100,000 runs), not by a Python loop over every run."""
        self.order = list(fold.runs)
        self.pieces, known = self._known, self._known
        if known:
            self._pending = {run_id: fold.runs[run_id] for run_id in fold.runs.keys() - known.keys()}
        else:
            self._pending = dict(fold.runs)
        self.tables = {name: ([], dict(table)) for name, table in tables_of(fold).items()}

    @property
    def is_delta(self) -> bool:
        return self.on is not None

    def before_change(self, run_id: str) -> None:
        run = self._pending.pop(run_id, None)
        if run is not None:
            self.pieces[run_id] = run_entry(run_id, run)

    def step(self) -> bool:
        """Encode the next run not encoded yet; False once every run is (the fold is let go)."""
        for run_id in self._next:
            run = self._pending.pop(run_id, None)
            if run is not None:
                self.pieces[run_id] = run_entry(run_id, run)
                return True
        self.release()
        return False

    def release(self) -> None:
        """Stop watching the fold (done, or abandoned)."""
        if self.fold.watch == self.before_change:
            self.fold.watch = None

    def keep(self) -> None:
        """Hand the entries this capture holds to `kept` for the next snapshot: once its runs are encoded
        and sealed (nothing reads them after), or as it is abandoned (each entry encoded is of the moment
        the capture was taken, every change since is in `fold.changed`); once."""
        if self.kept is None:
            return
        entries = self._known
        if self.on is not None:
            entries.update(self.pieces)
        self.kept.keep(self.fold, entries)
        self.kept = None

    def give_back(self) -> None:
        """The snapshot was not written: the next one must carry these changes too."""
        if self.fold.changed is not None:
            self.fold.changed = {**self.changed, **self.fold.changed}

    def encoded(self) -> bytes:
        """The object's bytes, once every run is encoded (`step` returned False)."""
        if self._pending:
            raise ValueError(f"{len(self._pending)} runs of the snapshot are not encoded yet")
        runs = entries(self.pieces[run_id] for run_id in self.order)
        if self.on is None:
            head = self.head
            head.refused, head.finished, head.symlinked, head.retired = (self.tables[name][1] for name in TABLES)
            return seal(compose(body_fields(head, runs)))
        return seal(compose(self._delta_fields(runs)), form=DELTA_FORMAT, key="delta")

    def _delta_fields(self, runs: Raw) -> list[tuple[str, Any]]:
        head, on = self.head, self.on
        assert on is not None
        return [
            ("processor_version", head.processor_version),
            ("topic", head.topic),
            ("partition", head.partition),
            ("next_offset", head.next_offset),
            ("base", {"next_offset": on.base_offset, "sha256": on.base_sha256}),
            ("previous", {"next_offset": on.tip_offset, "sha256": on.tip_sha256}),
            ("sequence", on.deltas + 1),
            ("settings", settings_out(head.settings)),
            ("runs", compose([("drop", self.drop), ("put", runs)])),
            *(
                (name, compose([("drop", drop), ("put", _held(name, put))]))
                for name, (drop, put) in self.tables.items()
            ),
        ]


def _held(name: str, put: dict[str, Any]) -> Any:
    """A table's changed entries as written: those held encoded spliced in as they are."""
    encoder = HELD_ENCODED.get(name)
    return put if encoder is None else encoder(put)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def decode_chain(objects: Sequence[bytes], sha256s: Sequence[str] | None = None, *, name: str = "snapshot") -> Snapshot:
    """The state a base and its deltas (oldest first) hold, every link verified; its `chain` is set.
    SnapshotCorrupt when any object is damaged or does not follow its predecessor (restore then
    tries an older one), SnapshotVersionError for a schema this build cannot restore. `sha256s`:
    each object's SHA-256 (hex), when its reader hashed it already (the snapshot store does, to
    verify it against its name: storage/snapshots.py `Decoder`); else each is hashed here."""
    digests = list(sha256s) if sha256s is not None else [sha256_hex(data) for data in objects]
    if len(digests) != len(objects):
        raise ValueError(f"{len(objects)} objects but {len(digests)} digests")
    version, body = opened(objects[0], name=name, form=FORMAT)
    try:
        chain = Chain.based(_offset(body["next_offset"]), digests[0], len(objects[0]), version)
    except (KeyError, ValueError) as exc:
        raise SnapshotCorrupt(f"{name}: checksum ok but content invalid ({exc!r}); skipping it") from None
    for number, data in enumerate(objects[1:], 1):
        label = f"{name}, delta {number} of {len(objects) - 1}"
        delta_version, delta = opened(data, name=label, form=DELTA_FORMAT, key="delta", typed=DELTA_ENVELOPE)
        try:
            problem = _link_problem(delta, delta_version, chain, body)
            if problem is None:
                _merge(body, delta)
                chain = chain.extended(_offset(delta["next_offset"]), digests[number], len(data))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            problem = f"checksum ok but content invalid ({exc!r})"
        if problem is not None:
            raise SnapshotCorrupt(f"{label}: {problem}; this chain cannot be restored past it — skipping it")
    snapshot = snapshot_in(body, version, name=name)
    snapshot.chain = chain
    return snapshot


def _offset(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"next_offset {value!r} is not an offset")
    return value


def _link_problem(delta: dict[str, Any], version: int, chain: Chain, body: dict[str, Any]) -> str | None:
    """Why `delta` does not follow the chain so far (its base, its predecessor, the partition and the
    settings of its base), or None."""
    if version != chain.schema_version:
        return f"it is of schema version {version}, its base of {chain.schema_version}"
    expected = {
        "base": {"next_offset": chain.base_offset, "sha256": chain.base_sha256},
        "previous": {"next_offset": chain.tip_offset, "sha256": chain.tip_sha256},
        "sequence": chain.deltas + 1,
        "topic": body["topic"],
        "partition": body["partition"],
        "settings": body["settings"],
    }
    for key, want in expected.items():
        if delta.get(key) != want:
            return f"its {key} is {delta.get(key)!r} where the chain read so far has {want!r}"
    if _offset(delta["next_offset"]) <= chain.tip_offset:
        return f"its next_offset {delta['next_offset']} is not after its predecessor's {chain.tip_offset}"
    return None


def _merge(body: dict[str, Any], delta: dict[str, Any]) -> None:
    """Apply one verified delta to a base body (JSON data: the run records stay opaque)."""
    body["next_offset"], body["processor_version"] = delta["next_offset"], delta["processor_version"]
    for name in ("runs", *TABLES):
        table, change = body[name], delta[name]
        drop, put = change["drop"], change["put"]
        if not isinstance(table, dict) or not isinstance(drop, list) or not isinstance(put, dict):
            raise ValueError(f"{name}: a delta is {{'drop': [...], 'put': {{...}}}} on an object")
        for key in drop:
            table.pop(key, None)
        table.update(put)
