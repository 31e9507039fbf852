"""The hostile ingredients of the whole-system streams (see system_stream.py): cross-run and nested
paths, refused and implicit runs, a root through a symlink, reused paths, escaped spellings, deep,
large, invalid and garbage records. Each builder appends to the generator's current phase."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.reliability.system_stream import RunModel, StreamGenerator

Builder = Callable[["StreamGenerator"], None]


def _kept_run(gen: StreamGenerator, partition: int | None = None) -> RunModel | None:
    """A started run (on `partition`) with a recent checkpoint: its newest path is kept by any keep."""
    runs = [r for r in gen.started_runs(partition) if r.paths and not r.root.startswith(gen.link)]
    return gen.rng.choice(runs) if runs else None


def _implicit(gen: StreamGenerator, partition: int) -> RunModel:
    """A run without run_started; its checkpoints go below `{storage}/{run id}` (its root after
    issue 20 #2, below --storage-root before)."""
    run = gen.add_run("imp", partition, None, False, None)
    gen.phase_now.root_files.append(run.root)
    return run


def stray_results(gen: StreamGenerator) -> None:
    """validation_result for an unknown run, for an unknown path of a known run, a typo'd subject."""
    data: dict[str, Any] = {"checkpoint_path": f"{gen.storage}/ghost/ckpt-1", "status": "VALIDATED"}
    ghost = gen.new_id("ghost")
    gen.emit(gen.event("validation_result", ghost, data), ghost)
    run = _kept_run(gen)
    if run is None:
        return
    typo = {"checkpoint_path": f"{run.root}/ckpt-typo", "status": "VALIDATION_FAILED", "error": "x"}
    gen.emit(gen.event("validation_result", run.run_id, typo), run.run_id)
    twin = run.run_id[:-1] + ("x" if run.run_id[-1] != "x" else "y")
    known = {"checkpoint_path": run.paths[-1], "status": "VALIDATED", "metrics": {"acc": 2.0}}
    gen.emit(gen.event("validation_result", twin, known), twin)


def implicit(gen: StreamGenerator) -> None:
    """Implicit runs on both partitions; a run_started after checkpoint-less reports (adopted) and
    one after a checkpoint (run_started_conflict), each followed by more reports."""
    for partition in range(2):
        run = _implicit(gen, partition)
        gen.reports(run, gen.rng.randint(3, 5))
    for with_checkpoint in (False, True):
        run = _implicit(gen, gen.rng.randrange(2))
        run.step += 1
        gen.emit(gen.event("report", run.run_id, {"metrics": {"step": run.step}, "checkpoint": None}), run.run_id)
        if with_checkpoint:
            gen.report(run)
        run.keep = 1
        gen.emit(gen.start(run), run.run_id)
        gen.reports(run, 3)


def cross_run(gen: StreamGenerator) -> None:
    """An implicit run reports a started run's root as its checkpoint, then evicts it."""
    victim = _kept_run(gen)
    if victim is None:
        return
    run = _implicit(gen, victim.partition)
    gen.report(run, victim.root, write=False)
    gen.reports(run, 3)


def above(gen: StreamGenerator) -> None:
    """A started run keeps checkpoints below `{root}/deep`; an implicit run on each partition
    reports that directory (above them) as its checkpoint, then evicts it."""
    victim = gen.add_run("deep", gen.rng.randrange(2), None, True, 2)
    gen.emit(gen.start(victim), victim.run_id)
    for _ in range(2):
        victim.step += 1
        gen.report(victim, f"{victim.root}/deep/ckpt-{victim.step:04d}")
    for partition in range(2):
        run = _implicit(gen, partition)
        gen.report(run, f"{victim.root}/deep", write=False)
        gen.reports(run, 3)


def cross_partition(gen: StreamGenerator) -> None:
    """Run B (keep 1) on one partition; run A on the other, its root inside B's root at a path B
    then reports as its own checkpoint and evicts. Only the deleter can see this (issue 20 #2)."""
    outer = gen.add_run("outer", gen.rng.randrange(2), None, True, 1)
    inner = gen.add_run("inner", 1 - outer.partition, f"{outer.root}/shared", True, 2)
    gen.emit(gen.start(outer), outer.run_id)
    gen.emit(gen.start(inner), inner.run_id)
    gen.reports(inner, 2)

    def attack() -> None:  # once inner's root is claimed (the next phase)
        gen.report(outer, inner.root, write=False)
        gen.reports(outer, 2)

    gen.later(attack)


def adopt_implicit(gen: StreamGenerator) -> None:
    """An implicit run keeps `{storage}/{id}/ckpt-0001`; a started run whose root is that directory
    (on the same or the other partition) re-reports the kept path, then evicts it."""
    run = _implicit(gen, gen.rng.randrange(2))
    kept = gen.report(run)
    other = gen.add_run("adopt", gen.rng.randrange(2), run.root, True, 1)

    def attack() -> None:
        gen.emit(gen.start(other), other.run_id)
        gen.report(other, kept, write=False)
        gen.reports(other, 2)

    if other.partition == run.partition:
        attack()  # the fold sees both: refused at once
    else:
        gen.later(attack)  # across partitions: once the implicit run's root is claimed


def refused(gen: StreamGenerator) -> None:
    """run_started refused (its root outside --storage-root; its root another run's), then more
    events of that run: reports naming the other run's kept checkpoints, evicted by new ones."""
    outside = gen.add_run("refused", gen.rng.randrange(2), str(gen.base / "outside" / "refused"), True, 1)
    gen.emit(gen.start(outside), outside.run_id)
    outside.root, outside.started = f"{gen.storage}/{outside.run_id}", False
    gen.reports(outside, 3)
    victim = _kept_run(gen)
    if victim is None:
        return
    twin = gen.add_run("refused", victim.partition, victim.root, True, 1)
    gen.emit(gen.start(twin), twin.run_id)
    twin.started = False
    gen.report(twin, victim.paths[-1], write=False)
    gen.emit(gen.event("worker_group_restart", twin.run_id, {"num_workers": 1}), twin.run_id)
    gen.reports(twin, 2)


def symlink_root(gen: StreamGenerator) -> None:
    """A run root below --storage-root through a link that leads outside it (keep 1: evictions)."""
    run = gen.add_run("linked", gen.rng.randrange(2), None, True, 1)
    run.root = f"{gen.link}/{run.run_id}"
    gen.emit(gen.start(run), run.run_id)
    gen.reports(run, 3)


def reuse(gen: StreamGenerator, deleted: dict[str, list[str]]) -> None:
    """Paths the outputs said were deleted, reported again by their run (files written anew)."""
    for run_id, paths in sorted(deleted.items())[:4]:
        run = gen.runs.get(run_id)
        if run is not None and run.started and not run.root.startswith(gen.link) and paths:
            gen.report(run, gen.rng.choice(paths))


def _escape(value: bytes) -> bytes:
    """The same event in another JSON spelling: escaped letters in the type and the subject key."""
    return (
        value.replace(b'"type":"ckptlog.run_started.v1"', b'"type":"ckptlog.run\\u005fstarted.v1"')
        .replace(b'"type":"ckptlog.report.v1"', b'"type":"ckptlog.rep\\u006frt.v1"')
        .replace(b'"subject":', b'"\\u0073ubject":', 1)
    )


def escaped(gen: StreamGenerator) -> None:
    """A run started and reporting in escaped spellings, and an escaped run_started whose root
    nests inside a started run's root on the same partition (refused), followed by its reports."""
    start = len(gen.phase_now.lines)
    run = gen.add_run("esc", gen.rng.randrange(2), None, True, 1)
    gen.emit(gen.start(run), run.run_id)
    gen.reports(run, 3)
    victim = _kept_run(gen, run.partition)
    if victim is not None:
        nested = gen.add_run("escnest", victim.partition, f"{victim.root}/inner", True, 1)
        gen.emit(gen.start(nested), nested.run_id)
        gen.reports(nested, 3)
    lines = gen.phase_now.lines
    lines[start:] = [type(line)(_escape(line.value or b""), line.key, line.partition) for line in lines[start:]]


def deep(gen: StreamGenerator) -> None:
    """20,000 levels (dead-lettered; once more with an escaped `subject` key), just past --max-depth
    (dead-lettered), just within (applied)."""
    run = _kept_run(gen)
    if run is None:
        return
    for levels, escaped in ((20_000, False), (20_000, True), (62, False), (56, False)):
        text = gen.event("report", run.run_id, {"metrics": {"m": "HOLE"}, "checkpoint": None})
        value = text.replace(b'"HOLE"', b"[" * levels + b"0" + b"]" * levels)
        gen.emit(_escape(value) if escaped else value, run.run_id)
        run.step += 1


def large(gen: StreamGenerator) -> None:
    """Past --max-payload-bytes (dead-lettered) and just below it (applied)."""
    run = _kept_run(gen)
    if run is None:
        return
    for size in (150_000, 90_000):
        gen.emit(gen.event("report", run.run_id, {"metrics": {"blob": "x" * size}, "checkpoint": None}), run.run_id)
        run.step += 1


def invalid_utf8(gen: StreamGenerator) -> None:
    run = _kept_run(gen)
    key = run.run_id if run is not None else gen.new_id("utf8")
    body = gen.event("report", key, {"metrics": {"name": "HOLE"}, "checkpoint": None})
    gen.emit(body.replace(b"HOLE", b"\xff\xfe\xc3("), key)
    gen.emit(b'{"specversion":"1.0","id":"\xed\xa0\x80","source":"s"}', None)


def garbage(gen: StreamGenerator) -> None:
    """Not JSON, not an object, truncated, blank; a tombstone, a key mismatch, an unknown type and
    version, and a valid report of a known run spread over several lines (applied)."""
    for value in (gen.rng.randbytes(40), b"null", b"[]", b'{"specversion": "1.0", ', b"", b"  \n "):
        gen.emit(value, None)
    run = _kept_run(gen)
    if run is None:
        return
    gen.emit(None, run.run_id)
    gen.emit(gen.event("report", run.run_id, {"metrics": {}, "checkpoint": None}), f"{run.run_id}-other", run.partition)
    gen.emit(gen.event("reboot", run.run_id, {}), run.run_id)
    gen.emit(gen.event("report", run.run_id, {"metrics": {}}).replace(b".v1", b".v9"), run.run_id)
    run.step += 1
    pretty = json.loads(gen.event("report", run.run_id, {"metrics": {"step": run.step}, "checkpoint": None}))
    gen.emit(json.dumps(pretty, indent=2).encode(), run.run_id)


def expired_reuse(gen: StreamGenerator) -> None:
    """Contract §3 *Expiry*: a run keeps two checkpoints and finishes; FINISHED_KEPT more runs of its
    partition finish, so its record expires and the fold forgets it. Then (now, or after the next
    phase's action) the id is started again in the same root, and the old reports are delivered
    once more: the new run evicts the old kept checkpoints, whose deletion the finished run's
    retired claim must refuse. Their files are written by the old run (`{id}#finished`), so the
    tree check counts any deletion of them as damage."""
    from tests.reliability.system_stream import FINISHED_KEPT

    partition = gen.rng.randrange(2)
    run = gen.add_run("fin", partition, None, True, 2)
    gen.emit(gen.start(run), run.run_id)
    first = len(gen.phase_now.lines)
    for _ in range(2):
        path = gen.report(run)
        gen.phase_now.writes[-1] = (f"{run.run_id}#finished", path)
    old = gen.phase_now.lines[first:]
    gen.emit(gen.event("run_finished", run.run_id, {}), run.run_id)
    gen.finished.add(run.run_id)
    for _ in range(FINISHED_KEPT):
        filler = gen.add_run("done", partition, None, True, 1)
        gen.emit(gen.start(filler), filler.run_id)
        gen.emit(gen.event("run_finished", filler.run_id, {}), filler.run_id)
        filler.started = False  # finished: no later ingredient picks it
        gen.finished.add(filler.run_id)
    run.started = False

    def reuse_the_id() -> None:
        run.started, run.keep, run.paths = True, 1, []
        gen.reused.add(run.run_id)
        gen.finished.discard(run.run_id)
        gen.emit(gen.start(run), run.run_id)
        gen.phase_now.lines.extend(old)  # the same records, ids and all: a late redelivery
        gen.reports(run, 2)

    gen.later(reuse_the_id) if gen.rng.random() < 0.5 else reuse_the_id()


def reopened(gen: StreamGenerator) -> None:
    """Contract §3 "Reopened runs": a run keeps two checkpoints and finishes (it retires: its retired
    claim lands in its root). Then (now, or after the next phase's action: a restart restores it
    from a snapshot) it is reopened and reports three more, whose evictions of its kept checkpoints
    must be deleted — its own retired claim removed once the reopen committed, never left to refuse
    them (whole_system checks it: `system_checks.check_reopened`)."""
    run = gen.add_run("reo", gen.rng.randrange(2), None, True, 2)
    gen.emit(gen.start(run), run.run_id)
    gen.reports(run, 2)
    gen.emit(gen.event("run_finished", run.run_id, {}), run.run_id)
    gen.finished.add(run.run_id)
    run.started = False  # finished: no other ingredient picks it until it is reopened

    def reopen() -> None:
        gen.emit(gen.event("run_reopened", run.run_id, {}), run.run_id)
        gen.finished.discard(run.run_id)
        gen.reopened.add(run.run_id)
        run.started = True
        for _ in range(3):
            gen.report(run)

    gen.later(reopen) if gen.rng.random() < 0.5 else reopen()


HUGE = 10**400


def huge_scores(gen: StreamGenerator) -> None:
    """Scores beyond a float's range, which the fold compares exactly (contract §3): a run ranked by
    `acc` (keep 1: ±10**400 and NaN evict one another), one ranked by a nested `eval/acc`, and a
    huge step and loss in a kept run's reports. Every reader must show them (issue 42 items 1-2):
    the tools watch and explain these runs (whole_system.Stream.tools)."""
    run = gen.add_run("huge", gen.rng.randrange(2), None, True, 1)
    gen.emit(gen.start(run), run.run_id)
    for score in gen.rng.sample([HUGE, -HUGE, 0.5, float("nan"), HUGE + 1], 5):
        gen.report(run, metrics={"acc": score, "big": {"n": -HUGE}})
    nested = gen.add_run("hugenest", gen.rng.randrange(2), None, True, 1)
    nested.order = "min"
    gen.emit(gen.start(nested, checkpoint_score_attribute="eval/acc"), nested.run_id)
    for score in (-HUGE, HUGE, 7, -HUGE - 1):
        gen.report(nested, metrics={"eval": {"acc": score, "loss": HUGE}})
    gen.huge += [run.run_id, nested.run_id]
    victim = _kept_run(gen)
    if victim is not None:
        gen.report(victim, metrics={"acc": gen.rng.choice([HUGE, -HUGE]), "loss": HUGE})


BUILDERS: dict[str, Builder] = {
    "stray_results": stray_results,
    "implicit": implicit,
    "cross_run": cross_run,
    "above": above,
    "cross_partition": cross_partition,
    "adopt_implicit": adopt_implicit,
    "refused": refused,
    "symlink_root": symlink_root,
    "escaped": escaped,
    "deep": deep,
    "large": large,
    "invalid_utf8": invalid_utf8,
    "garbage": garbage,
    "expired_reuse": expired_reuse,
    "reopened": reopened,
    "huge_scores": huge_scores,
}
