"""The hypothesis strategy `cases()`: small logs (tens of lines) with the settings and limits to fold them."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from ckptlog.events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH
from ckptlog.events.decoded import CheckpointConfig, ValidationSpec
from ckptlog.processor.core.state import DEFAULT_DEDUP_WINDOW, FoldSettings
from tests.unit.corpus.encoding import ABSENT, ROOT, Obj, Raw, encode, to_bytes
from tests.unit.corpus.values import (
    BAD_LINES,
    BAD_RUN_IDS,
    BAD_TIMES,
    EXTENSIONS_BAD,
    EXTENSIONS_GOOD,
    GOOD_TIMES,
    RARE_RUN_IDS,
    STYLES,
    UNKNOWN_TYPES,
    VALIDATIONS_BAD,
    VALIDATIONS_GOOD,
    Runs,
    checkpoint_path,
    known_path,
    metrics,
    odd_roots,
    root_spellings,
)

# -- events ------------------------------------------------------------------------------


def maybe(draw: st.DrawFn, one_in: int) -> bool:
    return draw(st.integers(0, one_in - 1)) == 0


def defect(draw: st.DrawFn, state: Runs, one_in: int) -> bool:
    """True one time in `one_in`, scaled by the log's messiness (never in a clean log)."""
    return state.mess > 0 and maybe(draw, one_in * state.mess)


def pick(draw: st.DrawFn, state: Runs, good: list[Any], bad: list[Any], bad_one_in: int = 8) -> Any:
    return draw(st.sampled_from(bad if defect(draw, state, bad_one_in) else good))


@st.composite
def run_started_data(draw: st.DrawFn, state: Runs, run: str) -> Obj:
    earlier = state.started.get(run)
    if earlier is not None and maybe(draw, 2):  # a repeat: identical, or with its keys reordered
        return earlier if maybe(draw, 2) else Obj(tuple(reversed(earlier.pairs)))
    config = Obj.of(
        ("num_to_keep", pick(draw, state, [1, 2, 2, 5, None, ABSENT], [0, -1, "2", True, 2.0, Raw("1e0")])),
        (
            "checkpoint_score_attribute",
            pick(draw, state, [None, "acc", "acc", "val/acc", "val/a/b", "loss", ABSENT], ["", 5, ["acc"]]),
        ),
        ("checkpoint_score_order", pick(draw, state, ["max", "min", ABSENT], ["MAX", None, 1])),
    )
    if defect(draw, state, 12):
        config = config.put("num_to_kep", 2)  # a typo: invalid_config
    data = Obj.of(
        (
            "storage_path",
            draw(st.sampled_from(odd_roots(run) if maybe(draw, 4 if state.mess else 8) else root_spellings(run))),
        ),
        (
            "checkpoint_config",
            config if not defect(draw, state, 10) else draw(st.sampled_from([ABSENT, None, [], "x"])),
        ),
        (
            "validation",
            pick(
                draw,
                state,
                [ABSENT, ABSENT, {}, {"fn_kwargs": {"a": 1}, "timeout_s": 3}],
                [{"timeout_s": 0}, None, True],
            ),
        ),
    )
    state.started[run] = data
    return data


@st.composite
def report_data(draw: st.DrawFn, state: Runs, run: str, with_checkpoint: bool) -> Obj:
    checkpoint: Any = ABSENT
    if with_checkpoint:
        path = draw(checkpoint_path(state, run))
        checkpoint = pick(
            draw,
            state,
            [Obj.of(("path", path))],
            [path, Obj.of(("path", 5)), Obj(()), Obj.of(("path", path), ("size", 1)), []],
            30,
        )
    elif maybe(draw, 2):
        checkpoint = None
    generation = pick(draw, state, [ABSENT, ABSENT, ABSENT, None, 0, 1, 2, 3], [-1, "1", 1.0, True, Raw("1e0")], 20)
    return Obj.of(
        ("metrics", draw(metrics()) if not defect(draw, state, 40) else draw(st.sampled_from([ABSENT, [], None, "m"]))),
        ("checkpoint", checkpoint),
        ("validation", pick(draw, state, VALIDATIONS_GOOD, VALIDATIONS_BAD) if not maybe(draw, 3) else ABSENT),
        ("generation", generation),
    )


@st.composite
def validation_result_data(draw: st.DrawFn, state: Runs, run: str) -> Obj:
    return Obj.of(
        ("checkpoint_path", known_path(draw, state, run)),
        (
            "status",
            pick(
                draw,
                state,
                ["VALIDATED", "VALIDATED", "VALIDATED", "VALIDATION_FAILED", "VALIDATION_TIMEOUT"],
                ["validated", "COMMITTED", ABSENT, None],
            ),
        ),
        ("metrics", draw(metrics()) if maybe(draw, 3) else draw(st.sampled_from([ABSENT, Obj(())]))),
        ("error", pick(draw, state, [ABSENT, ABSENT, None, "boom", "é\n"], [5, []])),
    )


@st.composite
def deletion_body(draw: st.DrawFn, state: Runs, run: str) -> tuple[str, Obj]:
    """(type, data): v2 lists, v1 single paths (upcast), and the odd shapes around them."""
    paths = [known_path(draw, state, run, early=True) for _ in range(draw(st.integers(1, 3)))]
    how = draw(st.integers(0, 9 if state.mess else 6))
    if how < 4:
        return "ckptlog.deletion_completed.v2", Obj.of(("checkpoint_paths", paths))
    if how < 7:
        return "ckptlog.deletion_completed.v1", Obj.of(("checkpoint_path", paths[0]))
    return draw(
        st.sampled_from(
            [
                ("ckptlog.deletion_completed.v2", Obj.of(("checkpoint_paths", []))),
                ("ckptlog.deletion_completed.v2", Obj.of(("checkpoint_paths", [""]))),
                ("ckptlog.deletion_completed.v2", Obj.of(("checkpoint_path", paths[0]))),
                ("ckptlog.deletion_completed.v1", Obj.of(("checkpoint_paths", paths))),  # already v2-shaped
                ("ckptlog.deletion_completed.v1", Obj.of(("checkpoint_path", paths[0]), ("checkpoint_paths", paths))),
                ("ckptlog.deletion_completed.v1", Obj.of(("checkpoint_path", 5))),
                ("ckptlog.deletion_completed.v1", Obj.of(("checkpoint_path", paths[0]), ("extra", 1))),
                ("ckptlog.deletion_completed.v9", Obj.of(("checkpoint_paths", paths))),
                ("ckptlog.deletion_completed.v0", Obj.of(("checkpoint_path", paths[0]))),
            ]
        )
    )


def mutate(draw: st.DrawFn, envelope: Obj) -> Obj:
    """One defect: a missing or extra field, a wrong type, a repeated key."""
    data = envelope.get("data")
    how = draw(st.integers(0, 7))
    if how == 0:
        return envelope.drop(draw(st.sampled_from(envelope.keys())))
    if how == 1 and isinstance(data, Obj) and data.pairs:
        return envelope.put("data", data.drop(draw(st.sampled_from(data.keys()))))
    if how == 2 and isinstance(data, Obj):
        return envelope.put("data", data.put(draw(st.sampled_from(["extra", "Metrics", "generation"])), 1))
    if how == 3 and isinstance(data, Obj) and data.pairs:  # a wrong type: "5" for 5, 5 for "x", null, []
        name, value = draw(st.sampled_from(data.pairs))
        wrong: Any = str(value) if isinstance(value, int) else draw(st.sampled_from([5, None, [], "5", True]))
        return envelope.put("data", data.put(name, wrong))
    if how == 4:  # a repeated envelope key with another value: the last one counts
        name = draw(st.sampled_from(["subject", "id", "type", "data", "specversion", "source"]))
        other = {
            "subject": "b",
            "id": "e-dup",
            "type": "ckptlog.worker_group_restart.v1",
            "data": Obj.of(("num_workers", 2)),
            "specversion": "1.0",
            "source": "",
        }[name]
        return envelope.append(name, other) if maybe(draw, 2) else Obj(((name, other), *envelope.pairs))
    if how == 5:
        return envelope.put("specversion", draw(st.sampled_from(["0.3", Raw("1.0"), None, "1.0 "])))
    if how == 6:
        return envelope.put("id", draw(st.sampled_from(["", 5, None, Raw('"\\u0065\\u0031"')])))
    return envelope.put("data", draw(st.sampled_from([None, [], "data", 5, Obj(())])))


@st.composite
def event_line(draw: st.DrawFn, state: Runs) -> bytes:
    run = draw(st.sampled_from(state.names))
    kind = draw(
        st.sampled_from(
            ["report"] * 8
            + ["metrics_only"] * 2
            + ["run_started"] * 2
            + ["validation_result"] * 4
            + ["restart", "deletion", "deletion"]
            + ["unknown"] * (state.mess > 0)
        )
    )
    if kind == "report" or kind == "metrics_only":
        typ, data = "ckptlog.report.v1", draw(report_data(state, run, kind == "report"))
    elif kind == "run_started":
        typ, data = "ckptlog.run_started.v1", draw(run_started_data(state, run))
    elif kind == "validation_result":
        typ, data = "ckptlog.validation_result.v1", draw(validation_result_data(state, run))
    elif kind == "restart":
        typ, data = (
            "ckptlog.worker_group_restart.v1",
            Obj.of(
                ("num_workers", pick(draw, state, [1, 2, 8], [0, "2", True, ABSENT, 1.0])),
                ("reason", pick(draw, state, [ABSENT, None, "oom"], [5])),
            ),
        )
    elif kind == "deletion":
        typ, data = draw(deletion_body(state, run))
    else:
        typ, data = draw(st.sampled_from(UNKNOWN_TYPES)), draw(report_data(state, run, True))
    state.counter += 1
    event_id: Any = f"e{state.counter}" if not maybe(draw, 15) else draw(st.sampled_from(["d1", "d2", "d3"]))
    subject: Any = run
    if defect(draw, state, 40):
        subject = draw(st.sampled_from(BAD_RUN_IDS))
    elif run == "a" and maybe(draw, 8):
        subject = Raw('"\\u0061"')  # "a", escaped: the shard router must give up on the line
    pairs: list[tuple[str, Any]] = [
        ("specversion", "1.0"),
        ("id", event_id),
        ("source", "test"),
        ("type", typ),
        ("subject", subject),
    ]
    if maybe(draw, 4):
        pairs.append(("time", pick(draw, state, GOOD_TIMES, BAD_TIMES, 6)))
    if maybe(draw, 6):
        pairs.append(("datacontenttype", pick(draw, state, ["application/json", None], ["text/plain", ""], 6)))
    if maybe(draw, 8):
        pairs.append(pick(draw, state, EXTENSIONS_GOOD, EXTENSIONS_BAD, 4))
    pairs.append(("data", data))
    if maybe(draw, 5):
        pairs = draw(st.permutations(pairs))
    envelope = Obj(tuple(pairs))
    if defect(draw, state, 20):
        envelope = mutate(draw, envelope)
    style = draw(st.sampled_from(STYLES))
    text = encode(envelope, style)
    if maybe(draw, 15):
        text = draw(st.sampled_from([" ", "\t", "\r"])) + text + draw(st.sampled_from(["", " ", "\t"]))
    return to_bytes(text)


def broken(draw: st.DrawFn, state: Runs) -> bytes:
    """A line no parser accepts, or that is blank, built from an earlier good one when there is one."""
    good = draw(st.sampled_from(state.lines)) if state.lines else b'{"specversion":"1.0"}'
    how = draw(st.integers(0, 9))
    if how == 0:
        return good[: draw(st.integers(0, max(0, len(good) - 1)))]  # truncated
    if how == 1:
        at = draw(st.integers(0, len(good)))
        return good[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\x00"])) + good[at:]
    if how == 2:
        return good + draw(st.sampled_from([b" x", b"{}", b",", b"\x00", b"]"]))
    if how == 3:
        return b"\xef\xbb\xbf" + good
    if how == 4:  # a raw control character or an invalid escape inside a string
        return good.replace(
            b'"test"',
            draw(
                st.sampled_from(
                    [
                        b'"te\tst"',
                        b'"te\x01st"',
                        b'"te\\qst"',
                        b'"te\\u12"',
                        b'"\\ud800"',
                        b'"\\udc00x"',
                        b'"\\ud83d\\u0041"',
                    ]
                )
            ),
            1,
        )
    return draw(st.sampled_from(BAD_LINES))


def sized(line: bytes, terminator: bytes, total: int) -> bytes:
    """`line` padded (inside a metric string) to `total` bytes with its terminator, when it can be."""
    found = _METRICS.search(line)
    if found is None:
        return line
    at = found.end()
    comma = b"" if line[at:].lstrip(b" \t\r").startswith(b"}") else b","  # `{}`: no comma after the pad
    pad = total - len(line) - len(terminator) - len(b'"pad":""' + comma)
    if pad < 0:
        return line
    return line[:at] + b'"pad":"' + b"p" * pad + b'"' + comma + line[at:]


_METRICS = re.compile(rb'"metrics"[ \t\r]*:[ \t\r]*\{')


# -- whole logs ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One log file and how to fold it."""

    content: bytes
    settings: FoldSettings
    max_bytes: int = DEFAULT_MAX_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH

    @property
    def folding(self) -> FoldSettings:
        """The settings with this case's decode limits: what `ckptlog fold` and the processor fold with."""
        return dataclasses.replace(self.settings, max_payload_bytes=self.max_bytes, max_depth=self.max_depth)

    def __repr__(self) -> str:
        lines = "\n".join(f"  {i:3d} {line!r}" for i, line in enumerate(self.content.split(b"\n"), 1))
        return (
            f"Case(settings={self.settings!r}, max_bytes={self.max_bytes}, max_depth={self.max_depth}, "
            f"content=\n{lines}\n)"
        )


def fold_settings(
    keep: int | None = None,
    attr: str | None = None,
    order: str = "max",
    default_root: str | None = ROOT,
    outer_root: str | None = ROOT,
    dedup_window: int = DEFAULT_DEDUP_WINDOW,
    validation: ValidationSpec | None = None,
) -> FoldSettings:
    config = CheckpointConfig(num_to_keep=keep, checkpoint_score_attribute=attr, checkpoint_score_order=order)  # type: ignore[arg-type]
    return FoldSettings(
        default_config=config,
        default_root=default_root,
        outer_root=outer_root,
        default_validation=validation or ValidationSpec(),
        dedup_window=dedup_window,
    )


@st.composite
def settings_(draw: st.DrawFn) -> FoldSettings:
    default_root, outer_root = draw(
        st.sampled_from(
            [
                (ROOT, ROOT),
                (ROOT, ROOT),
                (ROOT, ROOT),
                (ROOT, ROOT),
                (None, None),
                (ROOT, None),
                (None, ROOT),
                ("/r/", "/r"),
                ("s3://bucket", "s3://bucket"),
                (f"{ROOT}/a", ROOT),
            ]
        )
    )
    return fold_settings(
        keep=draw(st.sampled_from([1, 2, 2, 5, None])),
        attr=draw(st.sampled_from([None, "acc", "val/acc", "val/a/b"])),
        order=draw(st.sampled_from(["max", "min"])),
        default_root=default_root,
        outer_root=outer_root,
        dedup_window=draw(st.sampled_from([3, DEFAULT_DEDUP_WINDOW, DEFAULT_DEDUP_WINDOW])),
        validation=draw(st.sampled_from([None, None, ValidationSpec(fn_kwargs={"k": [1, "é"]}, timeout_s=2.5)])),
    )


@st.composite
def cases(draw: st.DrawFn, max_events: int = 40) -> Case:
    """A small log over a few runs (so the rules collide) and the settings and limits to fold it with."""
    names = (
        ["a", "b"]
        if maybe(draw, 2)
        else draw(st.lists(st.sampled_from(["a", "a", "b", "c", *RARE_RUN_IDS]), min_size=1, max_size=3, unique=True))
    )
    state = Runs(names, mess=draw(st.sampled_from([0, 0, 3, 1])))
    max_bytes = draw(st.sampled_from([DEFAULT_MAX_BYTES] * 5 + [300] * (state.mess > 0)))
    max_depth = draw(st.sampled_from([64, 64, 64, 11, 12] + [10, 5] * (state.mess > 0)))
    ending = draw(st.sampled_from([b"\n", b"\n", b"\r\n", None]))  # None: each line picks one
    out: list[bytes] = []
    for _ in range(draw(st.integers(3, max_events))):
        terminator = ending if ending is not None else draw(st.sampled_from([b"\n", b"\r\n"]))
        what = draw(st.integers(0, 19 if state.mess else 16))
        if what < 15:
            line = draw(event_line(state))
            state.lines.append(line)
        elif what < 17 and state.lines:  # an exact redelivery
            line = draw(st.sampled_from(state.lines))
        elif what < 19:
            line = broken(draw, state)
        else:  # right at the byte limit, counting the line end
            line = draw(event_line(state))
            line = sized(line, terminator, max_bytes + draw(st.sampled_from([-1, 0, 1])))
        out.append(line + terminator)
    if maybe(draw, 3):
        out[-1] = out[-1].rstrip(b"\r\n")  # the last line without its newline
    return Case(b"".join(out), draw(settings_()), max_bytes, max_depth)
