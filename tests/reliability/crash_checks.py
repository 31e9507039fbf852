"""What must hold after any number of crashes (contract §7, §9), checked against the log itself.

The input topic is read back as it is (read_committed: the processor's own deletion_completed
records included) and folded cleanly twice: by `ckptlog fold` (`fold_lines`: the views the
state topic must hold) and record by record through the service's own `BatchFolder` (the
output ids the output topics must hold, the inputs the DLQ must hold, and what each
checkpoint path is at the end of the log: live, evicted, or re-written by its job after an
eviction and then refused — its job's leftovers, on which nothing is asserted).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from ckptlog.events.paths import UnsafePath, normalize
from ckptlog.kafka import KafkaConnection, PartitionId, Record, read_topic
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.view import View
from ckptlog.processor.foldfile import fold_lines
from ckptlog.processor.service.batch import Batch, BatchFolder
from ckptlog.processor.service.records import H_OFFSET, H_PARTITION, RecordFactory, TopicNames
from ckptlog.processor.service.settings import ServiceSettings
from tests.reliability.crash_workload import Tree

LIVE, EVICTED, LEFTOVER = "live", "evicted", "leftover"


def names_of(settings: ServiceSettings) -> TopicNames:
    s = settings
    return TopicNames(
        s.input_topic, s.checkpoints_topic, s.validations_topic, s.watermarks_topic, s.state_topic, s.dlq_topic
    )


def same(a: Any, b: Any) -> bool:
    """Equality that treats NaN metrics as equal."""
    return json.dumps(a, sort_keys=True, allow_nan=True) == json.dumps(b, sort_keys=True, allow_nan=True)


def clean_fold(records: Sequence[Record], settings: ServiceSettings) -> tuple[dict[str, View], int]:
    """`ckptlog fold` of the log: the views (without `evicted`) and how many deletions it still owes."""
    values = [r.value for r in records if r.value is not None]
    result = fold_lines(values, settings.fold_settings())
    runs = result.document()["runs"]
    views = {run_id: {k: v for k, v in view.items() if k != "evicted"} for run_id, view in runs.items()}
    return views, len(result.fold.owed())


@dataclass
class Replayed:
    ids: set[str] = field(default_factory=set)  # every output id the log must publish (watermarks aside)
    marks: set[str] = field(default_factory=set)  # every watermark id the log may publish: one per event
    dead: set[tuple[int, int]] = field(default_factory=set)  # (partition, offset) of every dead-lettered input
    paths: dict[str, str] = field(default_factory=dict)  # checkpoint path -> LIVE / EVICTED / LEFTOVER
    evictions: int = 0
    reused: int = 0  # reports of a path evicted before, applied (contract §9: deleted, then reported again)
    inputs: dict[tuple[int, int], str] = field(default_factory=dict)  # (partition, offset) -> what it was

    def explain(self, output_id: str) -> str:
        """An output id (`ckptlog:{topic}:{partition}:{offset}:{seq}`) with what its input record was and
        what the clean fold made of it: the first thing to know when a processor published it anyway."""
        try:
            partition, offset = (int(part) for part in output_id.rsplit(":", 3)[1:3])
        except ValueError:
            return output_id
        return f"{output_id} (input: {self.inputs.get((partition, offset), 'not in the log')})"


def _reported(value: bytes | None) -> str | None:
    try:
        body = json.loads(value or b"")
        return str(body["data"]["checkpoint"]["path"]) if body.get("type") == "ckptlog.report.v1" else None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def _linked(record: Record, batch: Batch, registered: dict[tuple[int, str, str], int], out: Replayed) -> None:
    """The dead letter the processor writes, from its look at the storage, for the run_started that
    registered a root it then wrote a `root_refused` fact for (contract §9 *Roots behind a symlink*):
    the fold applies that run_started, so a clean fold makes no dead letter of it."""
    for run_id in batch.started:
        for root, claimant in batch.claims:
            if claimant == run_id:
                registered[(record.partition, run_id, root)] = record.offset
    if record.value is None or b'"ckptlog.root_refused.v1"' not in record.value:
        return
    try:
        body = json.loads(record.value)
        fact = (record.partition, str(body["subject"]), normalize(str(body["data"]["storage_path"])))
    except (ValueError, KeyError, TypeError, UnsafePath):
        return
    if fact in registered:
        out.dead.add((record.partition, registered[fact]))


def replay(records: Sequence[Record], settings: ServiceSettings, written: set[str]) -> Replayed:
    """Fold the log record by record as the service does; see the module docstring."""
    quiet = logging.getLogger("ckptlog.processor.service.batch")  # its dead-letter warnings are the service's to log
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return _replay(records, settings, written)
    finally:
        quiet.setLevel(level)


def _replay(records: Sequence[Record], settings: ServiceSettings, written: set[str]) -> Replayed:
    out, names = Replayed(), names_of(settings)
    folders: dict[int, BatchFolder] = {}
    registered: dict[tuple[int, str, str], int] = {}  # (partition, run, root) -> the run_started registering it
    for record in records:
        folder = folders.get(record.partition)
        if folder is None:
            factory = RecordFactory(names, PartitionId(record.topic, record.partition))
            fold = Fold(settings.fold_settings())
            folder = folders[record.partition] = BatchFolder(fold, factory)
        batch = folder.fold_records([record], 0)
        _linked(record, batch, registered, out)
        out.inputs[record.partition, record.offset] = _describe(record, batch)
        for output in batch.records:
            if output.topic == names.dlq:
                out.dead.add((record.partition, record.offset))
            elif output.topic == names.watermarks:  # one per run per batch: which ones depends on the batching
                out.marks.add(json.loads(output.value or b"")["id"])
            elif output.topic != names.state:
                out.ids.add(json.loads(output.value or b"")["id"])
        path = _reported(record.value)
        if path in written and batch.applied:
            out.reused += out.paths.get(path) is not None
            out.paths[path] = LIVE
        elif path in written and batch.rejected and out.paths.get(path) != LIVE:
            out.paths[path] = LEFTOVER  # its job wrote it again, the processor refused the report
        out.evictions += len(batch.deletions)
        for deletion in batch.deletions:
            out.paths[deletion.path] = EVICTED
    return out


def _describe(record: Record, batch: Batch) -> str:
    try:
        body = json.loads(record.value or b"")
        what = f"{body.get('type')} id={body.get('id')!r} subject={body.get('subject')!r}"
    except (ValueError, AttributeError, RecursionError):  # RecursionError: JSON nested too deep to parse
        what = f"{(record.value or b'')[:80]!r}"
    if batch.duplicates:
        return f"{what}; clean fold: duplicate"
    if batch.reasons:
        return f"{what}; clean fold: rejected {sorted(batch.reasons)}"
    return f"{what}; clean fold: applied, {len(batch.records)} records"


async def check_outputs(
    conn: KafkaConnection, settings: ServiceSettings, expected: Replayed, exactly_once: bool
) -> list[str]:
    """Every output id exactly once (at_least_once: at least once), every dead letter likewise. Watermarks
    are one per run per batch (contract §4), so which ids appear depends on the batches: each must be one
    a fold record by record makes (the same id, the same watermark), none twice under exactly_once."""
    problems: list[str] = []
    seen: Counter[str] = Counter()
    marks: Counter[str] = Counter()
    kinds: dict[str, str] = {}  # output id -> its type, as published
    for topic in (settings.checkpoints_topic, settings.validations_topic, settings.watermarks_topic):
        for record in await read_topic(conn, topic):
            body = json.loads(record.value or b"")
            (marks if topic == settings.watermarks_topic else seen)[body["id"]] += 1
            kinds[body["id"]] = f"{body['type']} at {record.topic}[{record.partition}]@{record.offset}"
    restored = sorted(i for i in seen if ":restored@" in i)
    if restored:
        problems.append(
            f"checkpoints_missing was published after a restore (a kept checkpoint was gone): {restored[:5]}"
        )
    explain = lambda i: f"{expected.explain(i)}, published as {kinds.get(i)}"
    _compare("output id", seen, expected.ids, set(restored), exactly_once, problems, explain)
    may = expected.marks & set(marks)  # none is owed (a later one of the run stands for it); none may be foreign
    _compare("watermark id", marks, may, set(), exactly_once, problems, explain)
    dead: Counter[tuple[int, int]] = Counter()
    for record in await read_topic(conn, settings.dlq_topic):
        headers = dict(record.headers)
        dead[(int(headers[H_PARTITION]), int(headers[H_OFFSET]))] += 1
    _compare("dead letter of input", dead, expected.dead, set(), exactly_once, problems)
    return problems


def _compare(
    what: str,
    seen: Counter[Any],
    expected: set[Any],
    ignore: set[Any],
    once: bool,
    problems: list[str],
    explain: Callable[[Any], str] = str,
) -> None:
    missing = sorted(expected - set(seen))
    extra = sorted(set(seen) - expected - ignore)
    twice = sorted(k for k, n in seen.items() if n > 1)
    if missing:
        problems.append(f"{len(missing)} {what}s of the log were never published (lost): {missing[:5]}")
    if extra:
        problems.append(
            f"{len(extra)} {what}s published that a clean fold of the log does not make: "
            + "; ".join(map(explain, extra[:5]))
        )
    if once and twice:
        problems.append(f"exactly_once: {len(twice)} {what}s visible more than once: {twice[:5]}")


async def check_watermarks(
    conn: KafkaConnection,
    settings: ServiceSettings,
    views: dict[str, View],
    restarted: Set[str] = frozenset(),
    finished: Set[str] = frozenset(),
) -> tuple[list[str], int]:
    """A read_committed reader, in order, never sees a run's committed or validated watermark go back,
    and ends at the view's. (at_least_once repeats records after a crash with the same ids: a reader
    skips ids it has seen.) `restarted`: run ids started again after their finished record expired
    (contract §3 *Expiry*: a new run, counting from zero); `finished`: runs retired, in no view."""
    problems, seen, last = [], set(), dict[str, tuple[int, int]]()
    records = await read_topic(conn, settings.watermarks_topic)
    for record in records:
        body = json.loads(record.value or b"")
        if body["id"] in seen:
            continue
        seen.add(body["id"])
        run, data = body["subject"], body["data"]
        now = (data["committed"], data["validated"])
        before = last.get(run, (0, 0))
        if run in restarted:
            last[run] = now
            continue
        if now[0] < before[0] or now[1] < before[1]:
            problems.append(
                f"watermark of {run} went back from {before} to {now} at {record.partition}@{record.offset}"
            )
        last[run] = (max(now[0], before[0]), max(now[1], before[1]))
    final = {run: (view["committed"], view["validated"]) for run, view in views.items()}
    last = {run: mark for run, mark in last.items() if run in final or run not in finished}
    if last != final:
        problems.append(f"the last watermarks {last} are not the views' {final}")
    return problems[:10], len(records)


def check_tree(tree: Tree, views: dict[str, View], expected: Replayed, guarded: dict[str, str]) -> list[str]:
    """Kept, latest and pending checkpoints exist with their files; evicted ones (not written again) are
    gone; nothing outside the runs root changed."""
    with tree.frozen():
        return _check_tree(tree, views, expected, guarded)


def _check_tree(tree: Tree, views: dict[str, View], expected: Replayed, guarded: dict[str, str]) -> list[str]:
    problems = []
    kept = {c["path"] for view in views.values() for c in view["checkpoints"]}
    latest = {view["latest"] for view in views.values() if view["latest"]}
    if not latest <= kept:
        problems.append(f"latest checkpoints not among the kept ones: {sorted(latest - kept)[:5]}")
    live = {p for p, state in expected.paths.items() if state == LIVE}
    if live != kept:
        problems.append(f"the test's own replay disagrees with the views: {sorted(live ^ kept)[:5]}")
    damaged = sorted(p for p in kept | latest if not tree.intact(p))
    if damaged:
        problems.append(f"{len(damaged)} kept/latest/pending checkpoints were deleted or damaged: {damaged[:5]}")
    remaining = sorted(p for p, state in expected.paths.items() if state == EVICTED and not tree.gone(p))
    if remaining:
        problems.append(f"{len(remaining)} evicted checkpoints were never deleted: {remaining[:5]}")
    now = tree.guarded()
    if now != guarded:
        changed = sorted(set(now.items()) ^ set(guarded.items()))
        problems.append(f"something outside the runs root changed: {changed[:5]}")
    return problems
