"""Event-log files for the differential test of the fold engines (tests/unit/test_native_fold.py).

`cases()` is a hypothesis strategy of small logs (tens of lines) plus the settings and limits to
fold them with; `NASTY` holds hand-written logs. Between them they reach every fold rule of
SPEC §2-4 and every decode path of events/codec.py: the msgspec fast path, pydantic, the
diagnosis of each rejection, the v1 -> v2 upcast, the depth scan, the byte limit.

A log is written as raw bytes, not through `json.dumps`, so it can hold what only a hand-written
producer sends: duplicate keys, `NaN`/`Infinity` literals, odd number spellings (`1E2`, `-0`,
`1e400`, 30-digit integers), escapes (`\\u0061`, `\\/`, surrogate pairs, lone surrogates), odd
whitespace, CRLF line ends, invalid UTF-8, a last line without a newline.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from events.codec import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH
from events.models import CheckpointConfig, ValidationSpec
from processor.core.state import DEFAULT_DEDUP_WINDOW, FoldSettings

ROOT = "file:///r"
ABSENT = object()  # a field left out of the object


class Raw(str):
    """JSON text written verbatim: a number spelling, a literal, an escaped string."""


@dataclass(frozen=True)
class Obj:
    """A JSON object as ordered pairs, so a key may repeat (every parser here keeps the last)."""

    pairs: tuple[tuple[str, Any], ...]

    @staticmethod
    def of(*pairs: tuple[str, Any]) -> Obj:
        return Obj(tuple((k, v) for k, v in pairs if v is not ABSENT))

    def keys(self) -> list[str]:
        return [k for k, _ in self.pairs]

    def get(self, key: str, default: Any = None) -> Any:
        found = default
        for k, v in self.pairs:
            if k == key:
                found = v
        return found

    def put(self, key: str, value: Any) -> Obj:
        """Replace every `key` (in place) or append it; ABSENT removes it."""
        if value is ABSENT:
            return self.drop(key)
        if key in self.keys():
            return Obj(tuple((k, value if k == key else v) for k, v in self.pairs))
        return Obj((*self.pairs, (key, value)))

    def drop(self, key: str) -> Obj:
        return Obj(tuple((k, v) for k, v in self.pairs if k != key))

    def append(self, key: str, value: Any) -> Obj:
        return Obj((*self.pairs, (key, value)))


@dataclass(frozen=True)
class Style:
    """How one line is spelled: separators (JSON whitespace around them) and escaping."""

    comma: str = ","
    colon: str = ":"
    ascii: bool = False


def encode(value: Any, style: Style = Style()) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Obj):
        items = value.pairs
    elif isinstance(value, dict):
        items = tuple(value.items())
    else:
        items = None
    if items is not None:
        return "{" + style.comma.join(f"{encode(k, style)}{style.colon}{encode(v, style)}" for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + style.comma.join(encode(v, style) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=style.ascii)
    return json.dumps(value)  # None, bools, ints, floats (nan -> NaN, inf -> Infinity)


def to_bytes(text: str) -> bytes:
    """UTF-8; a lone surrogate in `text` becomes its (invalid) 3-byte form on purpose."""
    return text.encode("utf-8", "surrogatepass")


# -- values ------------------------------------------------------------------------------

#: Number and literal spellings a Python producer never writes but a parser must read.
SCORE_TOKENS = [Raw(t) for t in (
    "NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "1E2", "1e+2", "1.0", "-0", "-0.0", "0.0",
    "0e0", "5e-324", "1.7976931348623157e308", "123456789012345678901234567890", "-123456789012345678901",
    "9007199254740993", "9007199254740992.0", "18446744073709551616", "9223372036854775808",
    "-9223372036854775809", "0.1000000000000000055511151231257827", "2.5E-3", "100000000000000000000.0",
    "0.30000000000000004", "1.00000000000000000001",
)]
#: Values as a Python producer writes them: ties (1 == 1.0, 0.0 == -0.0), exact int/float
#: comparisons (2**53 + 1 > 2.0**53; 10**30 < 1e30), non-numbers (bool, str, null, containers).
SCORE_VALUES: list[Any] = [
    0, 1, 2, -1, 0.5, 1.0, 2.0, -0.0, 0.0, 0.25, 2**53, 2**53 + 1, float(2**53), 2**60, 2**63, 2**64, 2**70,
    10**30, 1e30, -(2**63) - 1, True, False, None, "0.5", "", [], [0.5], {}, {"x": 1}, math.nan, math.inf,
    -math.inf,
]
NUMBER_TEXT = st.from_regex(r"-?(0|[1-9][0-9]{0,19})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?", fullmatch=True)
scores: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(SCORE_VALUES),
    st.sampled_from(SCORE_TOKENS),
    st.integers(-3, 3),
    st.floats(-3, 3, allow_nan=False).map(lambda x: round(x, 2)),
    st.floats(allow_nan=False, allow_infinity=False),
    NUMBER_TEXT.map(Raw),
)
#: Strings whose bytes fool cheap scanners: brackets (the depth bound), a quoted "subject"
#: (the shard router), backslashes, escapes of every kind.
TRICKY_STRINGS: list[Any] = [
    "{[{[{[{[{[{[{[{[{[{[{[{[", "]]]}}}", '"subject": "b"', "back\\slash", "\\", '"', "é", "ü-ß", "😀", "\u2028",
    "\x00\x1f", "\x7f\x85", "", " ", "x" * 40,
    Raw('"\\ud83d\\ude00"'), Raw('"\\u00e9"'), Raw('"\\u00E9"'), Raw('"\\/r\\/a"'), Raw('"\\"{[\\\\"'),
    Raw('"\\b\\f\\n\\r\\t"'), Raw('"\\u0000"'),
]
strings = st.one_of(st.sampled_from(TRICKY_STRINGS), st.text(max_size=6))
KEY_SPELLINGS = {  # the same key, escaped: "acc" and "val/acc"
    "acc": [Raw('"\\u0061cc"'), Raw('"ac\\u0063"')],
    "val/acc": [Raw('"val\\/acc"'), Raw('"val\\u002facc"')],
}


def nest(draw: st.DrawFn, levels: int, leaf: Any) -> Any:
    """`leaf` inside `levels` containers (objects and arrays mixed)."""
    value = leaf
    for _ in range(levels):
        value = Obj.of(("n", value)) if draw(st.booleans()) else [value]
    return value


def key(draw: st.DrawFn, name: str) -> str:
    spellings = KEY_SPELLINGS.get(name)
    if spellings and draw(st.integers(0, 7)) == 0:
        return draw(st.sampled_from(spellings))
    return name


@st.composite
def metrics(draw: st.DrawFn) -> Obj:
    """Score-bearing entries in every shape the `/` lookup handles, plus filler."""
    def s() -> Any:
        return draw(scores)

    shape = draw(st.integers(0, 13))
    pairs: list[tuple[str, Any]]
    if shape == 0:
        pairs = [(key(draw, "acc"), s())]
    elif shape == 1:
        pairs = [("val", Obj.of((key(draw, "acc"), s())))]
    elif shape == 2:
        pairs = [(key(draw, "val/acc"), s())]
    elif shape == 3:  # flat key and nested path both present: the flat key wins
        pairs = [("val", Obj.of(("acc", s()))), ("val/acc", s())]
    elif shape == 4:  # the flat key holds a dict: the nested path is read
        pairs = [("val/acc", Obj.of(("x", 1))), ("val", Obj.of(("acc", s())))]
    elif shape == 5:  # a scalar where a dict is looked into: the flat walk
        pairs = [("val", s()), ("acc", s())]
    elif shape == 6:  # keys containing "/" reached only by the flat walk (attribute "val/a/b")
        pairs = [("val", Obj.of(("a/b", s())))]
    elif shape == 7:
        pairs = [("val", Obj.of(("a", Obj.of(("b", s()))))), ("val/a", Obj.of(("b", s())))]
    elif shape == 8:
        pairs = [("val", [s()]), ("acc", [s()])]
    elif shape == 9:  # duplicate keys: the last value wins, at the first key's position
        pairs = [("acc", s()), ("loss", s()), ("acc", s())]
    elif shape == 10:
        pairs = [("val", Obj.of(("acc", s()))), ("val", Obj.of(("loss", s())))]
    elif shape == 11:
        pairs = [("acc", s()), ("val", Obj.of(("acc", s()), ("acc", s())))]
    elif shape == 12:
        pairs = [("val", Obj.of(("acc", Obj.of(("deep", s())))))]
    else:
        pairs = []
    if draw(st.booleans()):
        pairs.append(("step", draw(st.integers(0, 10**6))))
    if draw(st.integers(0, 3)) == 0:
        pairs.append(("loss", s()))
    if draw(st.integers(0, 5)) == 0:
        pairs.append((draw(strings), draw(strings)))
    if draw(st.integers(0, 7)) == 0:
        pairs.append(("tags", draw(st.lists(st.one_of(strings, scores), max_size=3))))
    if draw(st.integers(0, 9)) == 0:
        pairs.append(("subject", "b"))  # a second "subject" key on the line: the router gives up
    if draw(st.integers(0, 5)) == 0:  # around the fast path's bound of 8 nested containers
        pairs.append(("deep", nest(draw, draw(st.sampled_from([1, 4, 5, 6, 7, 8, 9, 10, 12])), s())))
    if draw(st.integers(0, 3)) == 0:
        pairs = draw(st.permutations(pairs))
    return Obj(tuple(pairs))


VALIDATIONS_GOOD: list[Any] = [
    False, True, Raw("false"), Raw("true"), {}, {"timeout_s": None}, {"timeout_s": 1}, {"timeout_s": 2.5},
    {"fn_kwargs": {"k": [1, {"x": "é"}], "n": Raw("NaN")}, "timeout_s": 10}, {"fn_kwargs": {}},
]
VALIDATIONS_BAD: list[Any] = [
    {"timeout_s": 0}, {"timeout_s": -1}, {"timeout_s": Raw("NaN")}, {"timeout_s": Raw("1e400")}, {"timeout_s": "5"}, {"fn_kwargs": []},
    {"extra": 1}, 1, 0, None, "true", [],
]

GOOD_TIMES = ["2026-01-31T12:00:00Z", "2026-01-31T12:00:00+05:30", "2026-01-31T12:00:00-00:00",
              "2026-01-31T12:00:00.123Z", "2026-01-31T12:00:00.123456Z", "2026-01-31T12:00:00.1234567Z",
              "2026-01-31T12:00:00.5+01:00", "2026-01-31", "2026-01-31 12:00:00", "20260131T120000Z",
              "2026-01-31T12:00Z", "2026-W05-6"]
BAD_TIMES: list[Any] = ["2026-13-01T00:00:00Z", "yesterday", "", "2026-01-31T25:00:00Z", "2026-01-31T12:00:00ZZ",
                        "2026-01-31T12:00:00+25:00", " 2026-01-31", "2026-01-31T12:00:00Z\n", 5, Raw("1e3"), True]
RARE_RUN_IDS = ["é", "r\u0085", "r\u2028", 'q"t', "back\\slash", "x" * 256, " "]
BAD_RUN_IDS: list[Any] = ["", "x" * 257, "ctl\x01", "del\x7f", "nl\n", "tab\t", 5, None, ["a"]]
UNKNOWN_TYPES: list[Any] = [
    "ckptlog.report.v2", "ckptlog.report.v0", "ckptlog.report.v01", "ckptlog.foo.v1", "com.example.report",
    "ckptlog.Report.v1", "ckptlog.run_started.v2", "ckptlog.deletion_completed.v3", "ckptlog.deletion_completed.v0",
    "ckptlog.report.v1 ", "ckptlog.report", "", 5, None,
]
EXTENSIONS_GOOD: list[tuple[str, Any]] = [("traceparent", "00-abc-01"), ("x1", {"a": [1, 2]}), ("partitionkey", 5),
                                          ("comexampleext", None)]
EXTENSIONS_BAD: list[tuple[str, Any]] = [("TraceParent", "x"), ("x_y", 1), ("ext-a", 1), ("", 1), ("é", 1)]
STYLES = [Style(), Style(), Style(", ", ": "), Style(" ,\t", " :\r"), Style(",\r", ":\t"),
          Style(ascii=True), Style(", ", ": ", ascii=True)]
BAD_LINES: list[bytes] = [
    b"", b"   ", b"\t", b"\x0c", b"\x0b", b"\r", b" \r", b"{", b"}", b"not json", b'{"a":}', b"[1,2", b"nul", b"tru",
    b"{}", b"[]", b"1", b'"s"', b"null", b"true", b"-", b"01", b"\xff", b"\xc0\xaf", b"\xef\xbb\xbf{}",
    b'{"type": 5}', b'{"type": "ckptlog.report.v1"}', b'{"specversion": "1.0"}', b"[" * 70, b"[" * 70 + b"]" * 70,
    b"{}{}", b'{"a": 1} x', b"\x00", b'{"a": "\t"}',
]


# -- paths -------------------------------------------------------------------------------


def root_spellings(run: str) -> list[str]:
    """storage_path values for a run: the canonical one and equivalent spellings."""
    return [f"{ROOT}/{run}", f"{ROOT}/{run}", f"{ROOT}/{run}", f"/r/{run}", f"{ROOT}/{run}/", f"file:///r//{run}",
            f"file:///r/./{run}", f"r/{run}", f"local:///r/{run}", f"FILE:///r/{run}", ROOT]


def odd_roots(run: str) -> list[str]:
    """storage_path values that are outside the outer root, unsafe, empty, or elsewhere."""
    return [f"s3://bucket/{run}", f"S3://bucket/{run}", "file:///other", f"{ROOT}/../{run}", f"{ROOT}/{run}/sub", "",
            " ", f"memory://r/{run}", f"{ROOT}/{run}é"]


@dataclass
class Runs:
    """What the generator remembers of a log so far, to aim later events at it."""

    names: list[str]
    mess: int = 1  # defects come this many times rarer than their base rate; 0: never (a clean log)
    paths: dict[str, list[str]] = field(default_factory=dict)  # run -> checkpoint paths reported
    canonical: dict[str, list[str]] = field(default_factory=dict)  # run -> those likeliest to be accepted
    started: dict[str, Obj] = field(default_factory=dict)  # run -> a run_started data body
    counter: int = 0
    lines: list[bytes] = field(default_factory=list)  # every event line so far (redeliveries)

    def all_paths(self) -> list[str]:
        return [p for paths in self.paths.values() for p in paths]


def respell(draw: st.DrawFn, path: str) -> str:
    """The same location spelled differently (or not at all)."""
    how = draw(st.integers(0, 5))
    if how == 0 and path.startswith("file://"):
        return path[len("file://"):]
    if how == 1:
        return path + "/"
    if how == 2:
        return path.replace("/r/", "/r//", 1)
    if how == 3:
        return path.replace("/r/", "/r/./", 1)
    return path


@st.composite
def checkpoint_path(draw: st.DrawFn, state: Runs, run: str) -> str:
    state.counter += 1
    n = state.counter
    earlier = state.all_paths()
    choice = draw(st.integers(0, 29 if state.mess else 23))
    if choice < 14:
        path = f"{ROOT}/{run}/c{n}"  # canonical, under the run's usual root: the fast case
        state.canonical.setdefault(run, []).append(path)
    elif choice < 17 and earlier:  # a duplicate, maybe evicted by now, maybe respelled
        path = respell(draw, draw(st.sampled_from(earlier)))
    elif choice < 24:
        base = draw(st.sampled_from(root_spellings(run) + odd_roots(run)[:2]))
        sep = draw(st.sampled_from(["/", "/", "//", "/./"]))
        name = draw(st.sampled_from([f"c{n}", f"c{n}/", f"ü{n}", f".h{n}", f"c{n}/x", f"..c{n}", f"c{n}..",
                                     "..", f"../c{n}", f"c{n}*"]))
        path = base.rstrip("/") + sep + name if base.strip() else base + name
    else:
        path = draw(st.sampled_from([f"file:///elsewhere/c{n}", f"s3://bucket/{run}/c{n}", f"S3://bucket/{run}/c{n}",
                                     f"file://r/{run}/c{n}", f"relative/c{n}", "", " ", "/", "file:///", ROOT,
                                     f"{ROOT}/{run}", "s3://bucket", f"file:///r/{run}/c{n}\\x"]))
    state.paths.setdefault(run, []).append(path)
    return path


def known_path(draw: st.DrawFn, state: Runs, run: str, early: bool = False) -> str:
    """A path for a validation result or a deletion: mostly one the run reported, often one of
    its latest (the likeliest to be pending) or, for a deletion, of its first (evicted by now)."""
    own, canonical = state.paths.get(run, []), state.canonical.get(run, [])
    choice = draw(st.integers(0, 9))
    if canonical and choice < 4:
        return respell(draw, draw(st.sampled_from(canonical[:3] if early else canonical[-2:])))
    if own and choice < 7:
        return respell(draw, draw(st.sampled_from(own)))
    if state.all_paths() and choice < 9:
        return draw(st.sampled_from(state.all_paths()))
    return draw(st.sampled_from([f"{ROOT}/{run}/never", f"{ROOT}/../x", "", " ", "s3://bucket/x"]))


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
        ("checkpoint_score_attribute", pick(draw, state, [None, "acc", "acc", "val/acc", "val/a/b", "loss", ABSENT],
                                            ["", 5, ["acc"]])),
        ("checkpoint_score_order", pick(draw, state, ["max", "min", ABSENT], ["MAX", None, 1])),
    )
    if defect(draw, state, 12):
        config = config.put("num_to_kep", 2)  # a typo: invalid_config
    data = Obj.of(
        ("storage_path", draw(st.sampled_from(odd_roots(run) if maybe(draw, 4 if state.mess else 8)
                                              else root_spellings(run)))),
        ("checkpoint_config", config if not defect(draw, state, 10) else draw(st.sampled_from([ABSENT, None, [], "x"]))),
        ("validation", pick(draw, state, [ABSENT, ABSENT, {}, {"fn_kwargs": {"a": 1}, "timeout_s": 3}],
                            [{"timeout_s": 0}, None, True])),
    )
    state.started[run] = data
    return data


@st.composite
def report_data(draw: st.DrawFn, state: Runs, run: str, with_checkpoint: bool) -> Obj:
    checkpoint: Any = ABSENT
    if with_checkpoint:
        path = draw(checkpoint_path(state, run))
        checkpoint = pick(draw, state, [Obj.of(("path", path))],
                          [path, Obj.of(("path", 5)), Obj(()), Obj.of(("path", path), ("size", 1)), []], 30)
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
        ("status", pick(draw, state, ["VALIDATED", "VALIDATED", "VALIDATED", "VALIDATION_FAILED", "VALIDATION_TIMEOUT"],
                        ["validated", "COMMITTED", ABSENT, None])),
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
    return draw(st.sampled_from([
        ("ckptlog.deletion_completed.v2", Obj.of(("checkpoint_paths", []))),
        ("ckptlog.deletion_completed.v2", Obj.of(("checkpoint_paths", [""]))),
        ("ckptlog.deletion_completed.v2", Obj.of(("checkpoint_path", paths[0]))),
        ("ckptlog.deletion_completed.v1", Obj.of(("checkpoint_paths", paths))),  # already v2-shaped
        ("ckptlog.deletion_completed.v1", Obj.of(("checkpoint_path", paths[0]), ("checkpoint_paths", paths))),
        ("ckptlog.deletion_completed.v1", Obj.of(("checkpoint_path", 5))),
        ("ckptlog.deletion_completed.v1", Obj.of(("checkpoint_path", paths[0]), ("extra", 1))),
        ("ckptlog.deletion_completed.v3", Obj.of(("checkpoint_paths", paths))),
        ("ckptlog.deletion_completed.v0", Obj.of(("checkpoint_path", paths[0]))),
    ]))


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
        other = {"subject": "b", "id": "e-dup", "type": "ckptlog.worker_group_restart.v1",
                 "data": Obj.of(("num_workers", 2)), "specversion": "1.0", "source": ""}[name]
        return envelope.append(name, other) if maybe(draw, 2) else Obj(((name, other), *envelope.pairs))
    if how == 5:
        return envelope.put("specversion", draw(st.sampled_from(["0.3", Raw("1.0"), None, "1.0 "])))
    if how == 6:
        return envelope.put("id", draw(st.sampled_from(["", 5, None, Raw('"\\u0065\\u0031"')])))
    return envelope.put("data", draw(st.sampled_from([None, [], "data", 5, Obj(())])))


@st.composite
def event_line(draw: st.DrawFn, state: Runs) -> bytes:
    run = draw(st.sampled_from(state.names))
    kind = draw(st.sampled_from(["report"] * 8 + ["metrics_only"] * 2 + ["run_started"] * 2 +
                                ["validation_result"] * 4 + ["restart", "deletion", "deletion"] +
                                ["unknown"] * (state.mess > 0)))
    if kind == "report" or kind == "metrics_only":
        typ, data = "ckptlog.report.v1", draw(report_data(state, run, kind == "report"))
    elif kind == "run_started":
        typ, data = "ckptlog.run_started.v1", draw(run_started_data(state, run))
    elif kind == "validation_result":
        typ, data = "ckptlog.validation_result.v1", draw(validation_result_data(state, run))
    elif kind == "restart":
        typ, data = "ckptlog.worker_group_restart.v1", Obj.of(
            ("num_workers", pick(draw, state, [1, 2, 8], [0, "2", True, ABSENT, 1.0])),
            ("reason", pick(draw, state, [ABSENT, None, "oom"], [5])))
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
    pairs: list[tuple[str, Any]] = [("specversion", "1.0"), ("id", event_id), ("source", "test"), ("type", typ),
                                    ("subject", subject)]
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
        return good.replace(b'"test"', draw(st.sampled_from([b'"te\tst"', b'"te\x01st"', b'"te\\qst"',
                                                             b'"te\\u12"', b'"\\ud800"', b'"\\udc00x"',
                                                             b'"\\ud83d\\u0041"'])), 1)
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

    def __repr__(self) -> str:
        lines = "\n".join(f"  {i:3d} {line!r}" for i, line in enumerate(self.content.split(b"\n"), 1))
        return (f"Case(settings={self.settings!r}, max_bytes={self.max_bytes}, max_depth={self.max_depth}, "
                f"content=\n{lines}\n)")


def fold_settings(keep: int | None = None, attr: str | None = None, order: str = "max",
                  default_root: str | None = ROOT, outer_root: str | None = ROOT,
                  dedup_window: int = DEFAULT_DEDUP_WINDOW,
                  validation: ValidationSpec | None = None) -> FoldSettings:
    config = CheckpointConfig(num_to_keep=keep, checkpoint_score_attribute=attr,
                              checkpoint_score_order=order)  # type: ignore[arg-type]
    return FoldSettings(default_config=config, default_root=default_root, outer_root=outer_root,
                        default_validation=validation or ValidationSpec(), dedup_window=dedup_window)


@st.composite
def settings_(draw: st.DrawFn) -> FoldSettings:
    default_root, outer_root = draw(st.sampled_from([
        (ROOT, ROOT), (ROOT, ROOT), (ROOT, ROOT), (ROOT, ROOT), (None, None), (ROOT, None), (None, ROOT), ("/r/", "/r"),
        ("s3://bucket", "s3://bucket"), (f"{ROOT}/a", ROOT)]))
    return fold_settings(
        keep=draw(st.sampled_from([1, 2, 2, 5, None])),
        attr=draw(st.sampled_from([None, "acc", "val/acc", "val/a/b"])),
        order=draw(st.sampled_from(["max", "min"])),
        default_root=default_root, outer_root=outer_root,
        dedup_window=draw(st.sampled_from([3, DEFAULT_DEDUP_WINDOW, DEFAULT_DEDUP_WINDOW])),
        validation=draw(st.sampled_from([None, None, ValidationSpec(fn_kwargs={"k": [1, "é"]}, timeout_s=2.5)])),
    )


@st.composite
def cases(draw: st.DrawFn, max_events: int = 40) -> Case:
    """A small log over a few runs (so the rules collide) and the settings and limits to fold it with."""
    names = ["a", "b"] if maybe(draw, 2) else draw(st.lists(st.sampled_from(["a", "a", "b", "c", *RARE_RUN_IDS]),
                                                             min_size=1, max_size=3, unique=True))
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


# -- hand-written logs ----------------------------------------------------------------------


def ev(kind: str, run: str, data: Any, event_id: str, *, version: int = 1, style: Style = Style(),
       **extra: Any) -> bytes:
    """One envelope line; `data` and `extra` values may hold Raw and Obj."""
    pairs: list[tuple[str, Any]] = [("specversion", "1.0"), ("id", event_id), ("source", "test"),
                                    ("type", f"ckptlog.{kind}.v{version}"), ("subject", run)]
    pairs += list(extra.items())
    pairs.append(("data", data))
    return to_bytes(encode(Obj(tuple(pairs)), style))


def started(run: str, root: str, keep: Any = None, attr: Any = None, order: Any = "max", eid: str = "",
            **data: Any) -> bytes:
    body = {"storage_path": root, "checkpoint_config": {"num_to_keep": keep, "checkpoint_score_attribute": attr,
                                                        "checkpoint_score_order": order}, **data}
    return ev("run_started", run, body, eid or f"start-{run}-{root}-{keep}-{attr}-{order}")


_ids = iter(range(10**9))


def rep(run: str, path: str | None, metrics: Any = None, validation: Any = False, eid: str = "",
        **data: Any) -> bytes:
    body: dict[str, Any] = {"metrics": {} if metrics is None else metrics,
                            "checkpoint": None if path is None else {"path": path}, "validation": validation, **data}
    return ev("report", run, body, eid or f"r{next(_ids)}")


def res(run: str, path: str, status: str = "VALIDATED", metrics: Any = None, eid: str = "", **data: Any) -> bytes:
    body = {"checkpoint_path": path, "status": status, "metrics": {} if metrics is None else metrics, **data}
    return ev("validation_result", run, body, eid or f"v{next(_ids)}")


def restart(run: str, workers: Any = 2, eid: str = "") -> bytes:
    return ev("worker_group_restart", run, {"num_workers": workers}, eid or f"w{next(_ids)}")


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
    ]


def _decode() -> list[bytes]:
    """Every decode path and rejection reason of events/codec.py."""
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
        ev("report", "a", base, "", ),
        ev("report", "a", {"metrics": {"acc": 1}, "extra": 1}, "bad1"),
        ev("report", "a", {"metrics": []}, "bad2"),
        ev("report", "a", {"checkpoint": None}, "bad3"),
        ev("report", "a", {"metrics": {}, "generation": "5"}, "bad4"),
        ev("report", "a", {"metrics": {}, "generation": -1}, "bad5"),
        ev("report", "a", {"metrics": {}, "validation": {"timeout_s": 0}}, "bad6"),
        ev("report", "a", {"metrics": {}, "checkpoint": {"path": ""}}, "bad7"),
        ev("report", "a", Obj.of(("metrics", {}), ("metrics", {"acc": 2}), ("checkpoint", None)), "dupkey"),
        ev("run_started", "z", {"storage_path": f"{ROOT}/z", "checkpoint_config": {"num_to_keep": 0}}, "cfg1"),
        ev("run_started", "z", {"storage_path": f"{ROOT}/z", "checkpoint_config": {"num_to_keep": "2"}}, "cfg2"),
        ev("run_started", "z", {"storage_path": f"{ROOT}/z", "checkpoint_config": {"checkpoint_score_order": "up"}},
           "cfg3"),
        ev("run_started", "z", {"storage_path": f"{ROOT}/z", "checkpoint_config": {"num_to_kep": 2}}, "cfg4"),
        ev("worker_group_restart", "z", {"num_workers": 0}, "w0"),
        ev("worker_group_restart", "z", {"num_workers": "5"}, "w1"),
        ev("report", "a", base, "v2", version=2),
        ev("report", "a", base, "v0", version=0),
        ev("report", "a", base, "v01").replace(b"report.v1", b"report.v01"),
        ev("nonsense", "a", base, "u1"),
        ev("deletion_completed", "a", {"checkpoint_paths": []}, "dc1", version=2),
        ev("deletion_completed", "a", {"checkpoint_path": 5}, "dc2", version=1),
        ev("deletion_completed", "a", {"checkpoint_paths": ["x"]}, "dc3", version=3),
        ev("validation_result", "a", {"checkpoint_path": "x", "status": "OK"}, "vr1"),
        rep("a", "file:///r/a/deep", {"d": nest_fixed(8, 1)}),  # nested to the fast path's bound
        rep("a", "file:///r/a/deeper", {"d": nest_fixed(9, 1)}),  # one past: pydantic decides
        rep("a", None, {"d": nest_fixed(70, 1)}),  # over the default max_depth
        rep("a", None, {"s": "[" * 80}),  # brackets in a string are not nesting
        rep("a", None, {"s": '\\"' + "{" * 80}),
        rep("a", None, {"k\ud800": 1}),  # a lone surrogate (its 3 invalid UTF-8 bytes)
        ev("report", "a", Obj.of(("metrics", Obj.of(("k", Raw('"\\ud800"')))), ("checkpoint", None)), "ls1"),
        ev("report", "a", Obj.of(("metrics", Obj.of(("k", Raw('"\\ud83d\\ude00\\u00e9\\"\\\\\\/"')))),
                                 ("checkpoint", None)), "esc"),
        rep("a", None, {"n": Raw("1e400"), "m": Raw("-0"), "o": Raw("1E2"), "p": Raw("123456789012345678901234567890"),
                        "q": Raw("-0.0"), "r": Raw("Infinity"), "s": Raw("5e-324")}),
        rep("a", "file:///r/a/nan", {"acc": Raw("NaN")}, validation={"fn_kwargs": {"x": Raw("Infinity")}}),
    ]


def _big_ints() -> list[bytes]:
    """Int scores a double cannot hold exactly: Python compares them with floats exactly."""
    scores: list[Any] = [2**53 + 1, float(2**53), 2**53, 10**30, 1e30, 2**70, -(2**63) - 1, Raw("9007199254740993"),
                         Raw("9007199254740992.0"), Raw("123456789012345678901234567890"), 1e308, Raw("1e400")]
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
            out.append(res(f"run-{(i - 8) % runs}", f"{ROOT}/run-{(i - 8) % runs}/c{i - 8}",
                           metrics={"val": {"acc": 0.95}}, eid=f"bv{i}"))
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
    "rules_crlf_no_last_newline": Case(_lines(_rules(), b"\r\n", last_newline=False),
                                       fold_settings(keep=1, attr="val/acc", order="min", dedup_window=3)),
    "rules_no_roots": Case(_lines(_rules()), fold_settings(keep=5, default_root=None, outer_root=None)),
    "rules_keep_all": Case(_lines(_rules()), fold_settings(keep=None, attr="acc", order="min", default_root="/r/",
                                                           outer_root="/r")),
    "decode": Case(_lines(_decode()), fold_settings(keep=2, attr="acc")),
    "decode_depth_11": Case(_lines(_decode()), fold_settings(keep=1, attr="acc"), max_depth=11),
    "decode_depth_5_bytes_300": Case(_lines(_decode()), fold_settings(), max_bytes=300, max_depth=5),
    "limits_300": Case(b"".join(_limits(300)), fold_settings(keep=2, attr="acc"), max_bytes=300),
    "big_int_scores": Case(_lines(_big_ints()), fold_settings(keep=4, attr="acc")),
    "big_int_scores_min": Case(_lines(_big_ints()), fold_settings(keep=4, attr="acc", order="min")),
    "bench_like": Case(_lines(_bench_like()), fold_settings(keep=2, attr="val/acc")),
}

