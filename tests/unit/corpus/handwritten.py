"""Hand-written logs (`NASTY`) that between them reach every rejection reason and fold rule."""

from __future__ import annotations

from typing import Any

from ckptlog.events.codec import DEFAULT_MAX_BYTES
from tests.unit.corpus.encoding import ROOT, Obj, Raw, Style, encode, to_bytes
from tests.unit.corpus.generated import Case, fold_settings, sized
from tests.unit.corpus.values import BAD_LINES

DEFAULT_STYLE = Style()

# -- hand-written logs ----------------------------------------------------------------------


def ev(
    kind: str, run: str, data: Any, event_id: str, *, version: int = 1, style: Style = DEFAULT_STYLE, **extra: Any
) -> bytes:
    """One envelope line; `data` and `extra` values may hold Raw and Obj."""
    pairs: list[tuple[str, Any]] = [
        ("specversion", "1.0"),
        ("id", event_id),
        ("source", "test"),
        ("type", f"ckptlog.{kind}.v{version}"),
        ("subject", run),
    ]
    pairs += list(extra.items())
    pairs.append(("data", data))
    return to_bytes(encode(Obj(tuple(pairs)), style))


def started(
    run: str, root: str, keep: Any = None, attr: Any = None, order: Any = "max", eid: str = "", **data: Any
) -> bytes:
    body = {
        "storage_path": root,
        "checkpoint_config": {"num_to_keep": keep, "checkpoint_score_attribute": attr, "checkpoint_score_order": order},
        **data,
    }
    return ev("run_started", run, body, eid or f"start-{run}-{root}-{keep}-{attr}-{order}")


_ids = iter(range(10**9))


def rep(run: str, path: str | None, metrics: Any = None, validation: Any = False, eid: str = "", **data: Any) -> bytes:
    body: dict[str, Any] = {
        "metrics": {} if metrics is None else metrics,
        "checkpoint": None if path is None else {"path": path},
        "validation": validation,
        **data,
    }
    return ev("report", run, body, eid or f"r{next(_ids)}")


def res(run: str, path: str, status: str = "VALIDATED", metrics: Any = None, eid: str = "", **data: Any) -> bytes:
    body = {"checkpoint_path": path, "status": status, "metrics": {} if metrics is None else metrics, **data}
    return ev("validation_result", run, body, eid or f"v{next(_ids)}")


def restart(run: str, workers: Any = 2, eid: str = "", **data: Any) -> bytes:
    return ev("worker_group_restart", run, {"num_workers": workers, **data}, eid or f"w{next(_ids)}")


def settled(run: str, deleted: Any = (), refused: Any = (), eid: str = "") -> bytes:
    """A v3 completion: `deleted` and `refused` as (path, eviction[, reason]) tuples."""
    data = {
        "deleted": [{"checkpoint_path": p, "eviction": e} for p, e in deleted],
        "refused": [{"checkpoint_path": p, "eviction": e, "reason": why} for p, e, why in refused],
    }
    return ev("deletion_completed", run, data, eid or f"d{next(_ids)}", version=3)


def deleted(run: str, *paths: str, version: int = 2, eid: str = "") -> bytes:
    data = {"checkpoint_paths": list(paths)} if version == 2 else {"checkpoint_path": paths[0]}
    return ev("deletion_completed", run, data, eid or f"d{next(_ids)}", version=version)


def _rules() -> list[bytes]:
    """Every fold rule, in one story per run."""
    a = f"{ROOT}/a"
    return [
        rep("a", None, {"loss": 1}),  # before run_started: created with the defaults
        restart("a"),
        started("a", a, keep=2, attr="val/acc", order="max", eid="sa"),  # replaces the implicit run
        started("a", a, keep=2, attr="val/acc", order="max", eid="sa2"),  # identical: a no-op
        started("a", a, keep=3, attr="val/acc", order="max", eid="sa3"),  # conflicting
        started("b", "file:///elsewhere/b", keep=1, eid="sb-out"),  # outside the outer root
        started("b", f"{ROOT}/../b", keep=1, eid="sb-unsafe"),  # unsafe
        started("b", "file:///r//b/", keep=1, attr="loss", order="min", eid="sb"),
        started("b", "file:///r//b/", keep=1, attr="loss", order="min", eid="sb"),  # a duplicate id
        rep("a", f"{a}/c0", {"val": {"acc": 0.5}}, eid="x1"),
        rep("a", f"{a}/c0", {"val": {"acc": 0.5}}, eid="x1"),  # redelivery: deduplicated
        rep("a", f"{a}/c0/", {"val": {"acc": 0.9}}),  # the same path, respelled: duplicate
        rep("a", f"{a}/c1", {"val": {"acc": 0.7}}, validation=True),
        rep("a", f"{a}/c2", {"val/acc": 0.1}, validation={"fn_kwargs": {"k": 1}, "timeout_s": 3}),
        rep("a", f"{a}/c3", {"val": {"acc": 0.6}}),  # evicts c0
        res("a", "/r/a/c1", "VALIDATED", {"val": {"acc": 0.05}}),  # respelled; the score drops
        res("a", f"{a}/c1", "VALIDATED", {"val": {"acc": 0.99}}),  # no longer pending: a warning
        res("a", f"{a}/c2", "VALIDATION_TIMEOUT", {"val": {"acc": 0.99}}, error="slow"),
        res("zz", f"{a}/c2", "VALIDATION_FAILED"),  # unknown run
        rep("a", f"{a}/c4", {"val": {"acc": 0.6}}, generation=0),  # a tie with c3
        restart("a", 4),
        rep("a", f"{a}/c5", {"val": {"acc": 0.2}}, generation=0),  # stale
        rep("a", f"{a}/c5", {"val": {"acc": 0.2}}, generation=2),
        rep("a", f"{a}/c6", {"val": {"acc": "high"}}, generation=2),  # non-numeric: ranks last
        rep("a", f"{a}/c7", {"val": {"acc": Raw("NaN")}}),
        rep("a", f"{a}/c8", {"val": {"acc": 0.8}}),
        rep("a", f"{a}/c0", {"val": {"acc": 0.9}}),  # evicted path reported again: duplicate
        deleted("a", f"{a}/c0", version=1),
        deleted("a", f"{a}/c0", version=1),  # again: harmless
        rep("a", f"{a}/c0", {"val": {"acc": 0.9}}),  # deleted, no longer outstanding: accepted again
        deleted("a", f"{a}/c1", "file:///r/a//c3/", f"{ROOT}/../x", f"{a}/never"),
        deleted("nobody", f"{a}/c1"),
        rep("b", "file:///r/b/c1", {"loss": 2}),
        rep("b", "/r/b/c2", {"loss": 1}),  # better under min: evicts c1
        rep("b", "file:///r/b/c3", {"loss": Raw("-Infinity")}),
        rep("b", "file:///r/a/c9", {"loss": 0}),  # another run's root
        rep("b", "s3://bucket/b/c1", {"loss": 0}),
        rep("c", "file:///r/c/c1", {"acc": 1}),  # default root and config (keep=2, attr acc)
        rep("c", "file:///r/c/c2", {"acc": 1.0}),  # a tie across int and float
        rep("c", "file:///r/c/c3", {"acc": True}),  # a bool is not a score
        rep("c", "file:///r/c/c4", {"acc": 2**53}),
        rep("c", "file:///r/c/c5", {"acc": float(2**53)}),  # a tie across int and float
        rep("c", "file:///r/c/c6", {"acc": Raw("-0")}),
        rep("c", "file:///r/c/c7", {"acc": -0.0}),
        res("c", "file:///r/c/c1", "VALIDATED"),  # never pending
        restart("d"),  # a run created by a restart
        started("d", f"{ROOT}/d", keep=None, eid="sd"),  # then started: counts carried over
        rep("d", f"{ROOT}/d/x", {}, validation=True),
        restart("d"),  # pending survives the restart
        rep("d", f"{ROOT}/d/y", {}, generation=1),
        res("d", f"{ROOT}/d/x", "VALIDATION_FAILED", error=None),
        rep("d", f"{ROOT}/d/z", {}, validation={"timeout_s": 0.5}),
        res("d", f"{ROOT}/d/z", "VALIDATION_TIMEOUT", error="took 0.5 s"),
        *_safety(),
        *_cross_run(),
    ]


def _cross_run() -> list[bytes]:
    """contract §9 across runs: no run's checkpoint may be another run's root or lie above one, so
    no eviction reaches into another run; a refused run_started refuses its run."""
    p = f"{ROOT}/p"
    return [
        rep("p", f"{p}/c1", {"acc": 1}),  # an implicit run: its own root, {storage root}/p
        rep("p", f"{ROOT}/b", {"acc": 2}),  # run b's root, as p's checkpoint: path_outside_root
        rep("p", f"{ROOT}/b/c9", {"acc": 2}),  # inside run b's root: path_outside_root
        started("t", f"{ROOT}/t", keep=1, eid="st"),
        rep("t", f"{p}/c1", {"acc": 1}),  # p's kept checkpoint, re-reported by t: path_outside_root
        started("s", f"{p}/sub", keep=1, eid="ss-nest"),  # inside implicit run p's root: refused
        rep("s", f"{p}/sub/c1", {"acc": 1}),  # so run s is refused: run_refused
        res("s", f"{p}/sub/c1"),  # a result too
        restart("s"),  # and a restart
        started("s", f"{ROOT}/s", keep=1, eid="ss"),  # a corrected run_started lifts the refusal
        rep("s", f"{ROOT}/s/c1", {"acc": 1}),
        rep("u/v", f"{ROOT}/u/v/c1", {"acc": 1}),  # an implicit run whose id is no directory name
        rep("..", None, {"acc": 1}),  # not even for a report without a checkpoint
        started("w", ROOT, keep=1, eid="sw"),  # the storage root itself nests with every implicit run
        rep("w", f"{ROOT}/w/c1", {"acc": 1}),  # refused
        started("x", f"{ROOT}/xx/inner", keep=1, eid="sx"),
        rep("xx", f"{ROOT}/xx/c1", {"acc": 1}),  # implicit run xx's root would hold run x's: refused
        restart("xx"),  # a restart would create it too: refused
    ]


def _safety() -> list[bytes]:
    """contract §9 and the generation rules of §3, told as run e's story."""
    e = f"{ROOT}/e"
    return [
        started("e", "file:///", keep=1, eid="se-root"),  # a filesystem root: unsafe_storage_root
        started("e", f"{ROOT}/b/e", keep=1, eid="se-nest"),  # inside run b's root: unsafe_storage_root
        started("e", e, keep=1, attr="acc", eid="se"),
        rep("e", f"{e}/x", {"acc": 0.5}),
        rep("e", f"{e}/x/y", {"acc": 0.9}),  # below a live checkpoint: nested_checkpoint_path
        rep("e", f"{e}/::memory", {"acc": 0.9}),  # fsspec URL chaining: unsafe_path
        rep("e", f"{e}/w", {"acc": 0.9}),  # evicts x (outstanding: still live)
        rep("e", f"{e}/x/z", {"acc": 0.9}),  # below an evicted, undeleted one: nested
        rep("e", None, {"acc": 1}, validation=True),  # validation_without_checkpoint
        settled("e", deleted=[(f"{e}/x", 7)]),  # names another eviction of x: nothing settles
        settled("e", deleted=[(f"{e}/x", 0)]),  # eviction 0 of x: deleted, the name is free
        rep("e", f"{e}/x", {"acc": 0.1}),  # x again: kept (latest)
        rep("e", f"{e}/u", {"acc": 0.05}),  # evicts x again: eviction 1
        settled("e", deleted=[(f"{e}/x", 0)]),  # the old completion: eviction 1 stays outstanding
        rep("e", f"{e}/x/q", {"acc": 0.95}),  # so x still nests: rejected
        settled("e", refused=[(f"{e}/x", 1, "a symlink inside the path")]),  # refused: final, settled
        rep("e", f"{e}/x/q", {"acc": 0.95}, generation=3),  # a newer generation: an implicit restart
        rep("e", f"{e}/v", {"acc": 0.2}, generation=2),  # stale now
        restart("e", 2, generation=3),  # the controller's restart, late: a no-op with a warning
        restart("e", 2, generation=5),
        restart("e", 2),  # no generation: the next one (6)
    ]


def _decode() -> list[bytes]:
    """Every decode path and rejection reason of ckptlog/events/codec.py."""
    base = {"metrics": {"acc": 1}, "checkpoint": None}
    long_line = rep("a", None, {"pad": "p" * (DEFAULT_MAX_BYTES + 10)})
    return [
        *BAD_LINES,
        long_line,
        rep("a", None, base["metrics"], time="2026-01-31T12:00:00.1234567Z"),
        rep("a", None, base["metrics"], time="2026-01-31T12:00:00+05:30"),
        ev("report", "a", base, "t1", time="not a time"),
        ev("report", "a", base, "t2", time=5),
        ev("report", "a", base, "x1", traceparent="00-1", comexample=[1, {"x": None}]),
        ev("report", "a", base, "x2", TraceParent="00-1"),
        ev("report", "a", base, "x3", datacontenttype="application/json"),
        ev("report", "a", base, "x4", datacontenttype="text/plain"),
        ev("report", "é\u0085", base, "s1"),
        ev("report", "ctl\x01", base, "s2"),
        ev("report", "x" * 256, base, "s3"),
        ev("report", "x" * 257, base, "s4"),
        ev("report", "", base, "s5"),
        ev("report", Raw('"\\u0061"'), base, "s6"),
        ev("report", 'q"t\\', base, "s7"),
        ev(
            "report",
            "a",
            base,
            "",
        ),
        ev("report", "a", {"metrics": {"acc": 1}, "extra": 1}, "bad1"),
        ev("report", "a", {"metrics": []}, "bad2"),
        ev("report", "a", {"checkpoint": None}, "bad3"),
        ev("report", "a", {"metrics": {}, "generation": "5"}, "bad4"),
        ev("report", "a", {"metrics": {}, "generation": -1}, "bad5"),
        ev("report", "a", {"metrics": {}, "validation": {"timeout_s": 0}}, "bad6"),
        ev("report", "a", {"metrics": {}, "checkpoint": {"path": ""}}, "bad7"),
        ev("report", "a", Obj.of(("metrics", {}), ("metrics", {"acc": 2}), ("checkpoint", None)), "dupkey"),
        # structs spelled as arrays of their fields: serde reads those unless told not to
        ev("report", "a", [{"acc": 1}, None, False, None], "arr1"),
        ev("report", "a", {"metrics": {"acc": 1}, "checkpoint": [f"{ROOT}/a/arr"]}, "arr2"),
        ev("validation_result", "a", [f"{ROOT}/a/arr", "VALIDATED"], "arr3"),
        ev("deletion_completed", "a", [[f"{ROOT}/a/arr"]], "arr4", version=2),
        to_bytes(
            encode(
                Obj.of(
                    ("data", [{"acc": 1}, None, True, None]),
                    ("specversion", "1.0"),
                    ("id", "arr5"),
                    ("source", "test"),
                    ("type", "ckptlog.report.v1"),
                    ("subject", "a"),
                )
            )
        ),
        ev("run_started", "z", {"storage_path": f"{ROOT}/z", "checkpoint_config": {"num_to_keep": 0}}, "cfg1"),
        ev("run_started", "z", {"storage_path": f"{ROOT}/z", "checkpoint_config": {"num_to_keep": "2"}}, "cfg2"),
        ev(
            "run_started",
            "z",
            {"storage_path": f"{ROOT}/z", "checkpoint_config": {"checkpoint_score_order": "up"}},
            "cfg3",
        ),
        ev("run_started", "z", {"storage_path": f"{ROOT}/z", "checkpoint_config": {"num_to_kep": 2}}, "cfg4"),
        ev("worker_group_restart", "z", {"num_workers": 0}, "w0"),
        ev("worker_group_restart", "z", {"num_workers": "5"}, "w1"),
        ev("report", "a", base, "v2", version=2),
        ev("report", "a", base, "v0", version=0),
        ev("report", "a", base, "v01").replace(b"report.v1", b"report.v01"),
        ev("nonsense", "a", base, "u1"),
        ev("deletion_completed", "a", {"checkpoint_paths": []}, "dc1", version=2),
        ev("deletion_completed", "a", {"checkpoint_path": 5}, "dc2", version=1),
        ev("deletion_completed", "a", {"checkpoint_paths": ["x"]}, "dc3", version=9),
        ev("validation_result", "a", {"checkpoint_path": "x", "status": "OK"}, "vr1"),
        rep("a", "file:///r/a/deep", {"d": nest_fixed(8, 1)}),  # nested to the fast path's bound
        rep("a", "file:///r/a/deeper", {"d": nest_fixed(9, 1)}),  # one past: pydantic decides
        rep("a", None, {"d": nest_fixed(70, 1)}),  # over the default max_depth
        rep("a", None, {"s": "[" * 80}),  # brackets in a string are not nesting
        rep("a", None, {"s": '\\"' + "{" * 80}),
        rep("a", None, {"k\ud800": 1}),  # a lone surrogate (its 3 invalid UTF-8 bytes)
        ev("report", "a", Obj.of(("metrics", Obj.of(("k", Raw('"\\ud800"')))), ("checkpoint", None)), "ls1"),
        ev(
            "report",
            "a",
            Obj.of(("metrics", Obj.of(("k", Raw('"\\ud83d\\ude00\\u00e9\\"\\\\\\/"')))), ("checkpoint", None)),
            "esc",
        ),
        rep(
            "a",
            None,
            {
                "n": Raw("1e400"),
                "m": Raw("-0"),
                "o": Raw("1E2"),
                "p": Raw("123456789012345678901234567890"),
                "q": Raw("-0.0"),
                "r": Raw("Infinity"),
                "s": Raw("5e-324"),
            },
        ),
        rep("a", "file:///r/a/nan", {"acc": Raw("NaN")}, validation={"fn_kwargs": {"x": Raw("Infinity")}}),
    ]


def finish(run: str, eid: str = "", **data: Any) -> bytes:
    return ev("run_finished", run, data, eid or f"f{next(_ids)}")


def _finished() -> list[bytes]:
    """contract §3 "Finished runs": the last retention, events after the finish, retirement once
    settled, the finished run's id and root never reused."""
    g = f"{ROOT}/g"
    return [
        started("g", g, keep=3, attr="acc", eid="sg"),
        *(rep("g", f"{g}/c{i}", {"acc": i % 3}, eid=f"g{i}") for i in range(4)),
        rep("g", f"{g}/p", {"acc": -1}, validation=True, eid="gp"),  # pending at the finish: kept, never deleted
        finish("g", keep="best", eid="fg"),  # evicts all but the best, the latest (p) and pending (p)
        rep("g", f"{g}/late", {"acc": 9}),  # run_finished
        res("g", f"{g}/p"),  # the validation in flight: refused, run_finished
        rep("g", f"{g}/c3", {"acc": 0}, eid="g3"),  # a redelivery while hot: a duplicate
        finish("g", eid="fg2"),  # a repeated finish: a no-op
        settled("g", deleted=[(f"{g}/c0", 0), (f"{g}/c3", 1), (f"{g}/c1", 2)]),  # all settled: g retires
        rep("g", f"{g}/c3", {"acc": 0}, eid="g3"),  # retired: run_finished
        started("g", f"{ROOT}/g2", eid="sg2"),  # the id again: run_finished
        started("h", f"{g}/inner", eid="sh"),  # inside the finished run's root: unsafe_storage_root
        finish("nobody"),  # nothing to finish: a warning
        rep("k", f"{ROOT}/k/c0", {"acc": 1}),  # an implicit run, finished with nothing owed: retired at once
        finish("k"),
        started("m", f"{ROOT}/m", keep=1, eid="sm"),  # an abandoned run, forgotten by an operator
        rep("m", f"{ROOT}/m/c0", {"acc": 1}, eid="m0"),
        rep("m", f"{ROOT}/m/c1", {"acc": 2}, eid="m1"),  # evicts c0
        ev("run_forgotten", "m", {}, "fm"),  # c0's deletion is owed: deletions_owed
        settled("m", deleted=[(f"{ROOT}/m/c0", 0)]),
        ev("run_forgotten", "m", {}, "fm"),  # now: retired, c1 stays in storage
        rep("m", f"{ROOT}/m/c2", {"acc": 3}),  # run_finished
    ]


def _symlinked() -> list[bytes]:
    """contract §9 *Roots behind a symlink*: the processor's fact refuses a run for good; a stale fact,
    one for a finished run and one for a run it does not know change nothing."""
    r, fact = f"{ROOT}/l/r", "root_refused"

    def seen(run: str, root: str, eid: str) -> bytes:
        return ev(fact, run, {"storage_path": root, "reason": f"{ROOT}/l is a symlink"}, eid)

    return [
        started("r", r, keep=1, eid="sr"),
        rep("r", f"{r}/c0", {"acc": 1}, eid="r0"),
        rep("r", f"{r}/c1", {"acc": 2}, eid="r1"),  # evicts c0: owed
        seen("r", f"{ROOT}/l", "x0"),  # another root than the run's: a no-op
        seen("r", f"{ROOT}//l/r/", "x1"),  # the run's root: refused, c0 settled as refused, its state leaves
        rep("r", f"{r}/c2", {"acc": 3}),  # root_behind_symlink
        started("r", f"{ROOT}/fixed", eid="sr2"),  # root_behind_symlink: a new run needs a new id
        settled("r", deleted=[(f"{r}/c0", 0)]),  # a no-op
        seen("r", r, "x1"),  # the fact again: a no-op
        ev("run_forgotten", "r", {}, "fr"),  # a no-op
        started("s", f"{r}/inside", eid="ss"),  # inside the refused run's root, still registered: unsafe_storage_root
        seen("nobody", f"{ROOT}/nobody", "x2"),  # a run the partition does not know: a no-op
        started("t", f"{ROOT}/t", eid="st"),
        finish("t"),
        seen("t", f"{ROOT}/t", "x3"),  # a finished (retired) run: a no-op, never a run_finished dead letter
        ev(fact, "t", {"storage_path": f"{ROOT}/t"}, "x4"),  # no reason: invalid_data
    ]


def _reopened() -> list[bytes]:
    """contract §3 "Reopened runs": a retired run and a run still owing deletions reopened and going
    on (their later evictions deleted as ever), finished again; what a reopen is refused for."""
    r, s = f"{ROOT}/r", f"{ROOT}/s"
    return [
        started("r", r, keep=2, attr="acc", eid="sr"),
        *(rep("r", f"{r}/c{i}", {"acc": i}, eid=f"r{i}") for i in range(3)),  # evicts c0
        ev("run_reopened", "r", {}, "o-live"),  # not finished: run_not_finished
        finish("r", eid="fr"),  # owes c0: stays hot
        settled("r", deleted=[(f"{r}/c0", 0)]),  # retires, its state kept
        rep("r", f"{r}/c3", {"acc": 9}, eid="r3"),  # run_finished
        ev("run_reopened", "r", {}, "o-r1"),  # back: c1, c2 kept, report_count 3
        ev("run_reopened", "r", {}, "o-r1"),  # a retry: a duplicate
        rep("r", f"{r}/c3", {"acc": 9}, eid="r3"),  # applied now: evicts c1
        finish("r", eid="fr1"),  # owes c1: hot
        ev("run_reopened", "r", {}, "o-r2"),  # finished and hot: reopened, c1 still owed
        rep("r", f"{r}/c4", {"acc": 0}),  # the latest, ranked last: nothing evicted; c1 still owed
        ev("run_reopened", "nobody", {}, "o-n"),  # never seen: unknown_run
        started("s", s, keep=1, attr="acc", eid="ss"),
        rep("s", f"{s}/c0", {"acc": 1}, eid="s0"),
        ev("run_forgotten", "s", {}, "fs"),  # retired with no state
        ev("run_reopened", "s", {}, "o-s"),  # not_reopenable
    ]


def _big_ints() -> list[bytes]:
    """Int scores a double cannot hold exactly: Python compares them with floats exactly."""
    scores: list[Any] = [
        2**53 + 1,
        float(2**53),
        2**53,
        10**30,
        1e30,
        2**70,
        -(2**63) - 1,
        Raw("9007199254740993"),
        Raw("9007199254740992.0"),
        Raw("123456789012345678901234567890"),
        1e308,
        Raw("1e400"),
    ]
    return [rep("g", f"{ROOT}/g/c{i}", {"acc": v}, validation=i % 3 == 0) for i, v in enumerate(scores)] + [
        res("g", f"{ROOT}/g/c0", metrics={"acc": 2**64 + 1}),
        res("g", f"{ROOT}/g/c3", metrics={"acc": 2**64}),
        res("g", f"{ROOT}/g/c6", metrics={"acc": float(2**64)}),
    ]


def nest_fixed(levels: int, leaf: Any) -> Any:
    value = leaf
    for i in range(levels):
        value = {"n": value} if i % 2 else [value]
    return value


def _lines(lines: list[bytes], ending: bytes = b"\n", last_newline: bool = True) -> bytes:
    text = ending.join(lines)
    return text + ending if last_newline else text


def _bench_like(runs: int = 12, reports: int = 120) -> list[bytes]:
    """Many runs (for the shard plan), a share of lines the router cannot place."""
    out = []
    for r in range(runs):
        out.append(started(f"run-{r}", f"{ROOT}/run-{r}", keep=3, attr="val/acc", eid=f"s{r}"))
    for i in range(reports):
        run = f"run-{i % runs}"
        metrics: Any = {"val": {"acc": (i * 37 % 11) / 10}, "step": i}
        if i % 7 == 0:
            metrics["subject"] = "run-0"  # a second "subject" key
        if i % 5 == 0:
            metrics["note"] = "é\\"  # a backslash
        out.append(rep(run, f"{ROOT}/{run}/c{i}", metrics, validation=i % 4 == 0, eid=f"b{i}"))
        if i % 4 == 0 and i > 8:
            out.append(
                res(
                    f"run-{(i - 8) % runs}",
                    f"{ROOT}/run-{(i - 8) % runs}/c{i - 8}",
                    metrics={"val": {"acc": 0.95}},
                    eid=f"bv{i}",
                )
            )
    return out


def _limits(max_bytes: int) -> list[bytes]:
    out = []
    for delta in (-2, -1, 0, 1, 2):
        for end in (b"\n", b"\r\n"):
            line = rep("a", f"{ROOT}/a/s{delta}{len(end)}", {"acc": delta}, eid=f"size{delta}{len(end)}")
            out.append(sized(line, end, max_bytes + delta) + end)
    return out


NASTY: dict[str, Case] = {
    "rules": Case(_lines(_rules()), fold_settings(keep=2, attr="acc")),
    "rules_crlf_no_last_newline": Case(
        _lines(_rules(), b"\r\n", last_newline=False),
        fold_settings(keep=1, attr="val/acc", order="min", dedup_window=3),
    ),
    "rules_no_roots": Case(_lines(_rules()), fold_settings(keep=5, default_root=None, outer_root=None)),
    "rules_keep_all": Case(
        _lines(_rules()), fold_settings(keep=None, attr="acc", order="min", default_root="/r/", outer_root="/r")
    ),
    "decode": Case(_lines(_decode()), fold_settings(keep=2, attr="acc")),
    "decode_depth_11": Case(_lines(_decode()), fold_settings(keep=1, attr="acc"), max_depth=11),
    "decode_depth_5_bytes_300": Case(_lines(_decode()), fold_settings(), max_bytes=300, max_depth=5),
    "limits_300": Case(b"".join(_limits(300)), fold_settings(keep=2, attr="acc"), max_bytes=300),
    "big_int_scores": Case(_lines(_big_ints()), fold_settings(keep=4, attr="acc")),
    "big_int_scores_min": Case(_lines(_big_ints()), fold_settings(keep=4, attr="acc", order="min")),
    "bench_like": Case(_lines(_bench_like()), fold_settings(keep=2, attr="val/acc")),
    "finished": Case(_lines(_finished()), fold_settings(keep=2, attr="acc")),
    "symlinked": Case(_lines(_symlinked()), fold_settings(keep=2, attr="acc")),
    "reopened": Case(_lines(_reopened()), fold_settings(keep=2, attr="acc")),
}
