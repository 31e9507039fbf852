"""Values and paths for corpus events: score spellings, metrics, run ids, checkpoint path spellings."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from tests.unit.corpus.encoding import ROOT, Obj, Raw, Style

# -- values ------------------------------------------------------------------------------

#: Number and literal spellings a Python producer never writes but a parser must read.
SCORE_TOKENS = [
    Raw(t)
    for t in (
        "NaN",
        "Infinity",
        "-Infinity",
        "1e400",
        "-1e400",
        "1e-400",
        "1E2",
        "1e+2",
        "1.0",
        "-0",
        "-0.0",
        "0.0",
        "0e0",
        "5e-324",
        "1.7976931348623157e308",
        "123456789012345678901234567890",
        "-123456789012345678901",
        "9007199254740993",
        "9007199254740992.0",
        "18446744073709551616",
        "9223372036854775808",
        "-9223372036854775809",
        "0.1000000000000000055511151231257827",
        "2.5E-3",
        "100000000000000000000.0",
        "0.30000000000000004",
        "1.00000000000000000001",
    )
]
#: Values as a Python producer writes them: ties (1 == 1.0, 0.0 == -0.0), exact int/float
#: comparisons (2**53 + 1 > 2.0**53; 10**30 < 1e30), non-numbers (bool, str, null, containers).
SCORE_VALUES: list[Any] = [
    0,
    1,
    2,
    -1,
    0.5,
    1.0,
    2.0,
    -0.0,
    0.0,
    0.25,
    2**53,
    2**53 + 1,
    float(2**53),
    2**60,
    2**63,
    2**64,
    2**70,
    10**30,
    1e30,
    -(2**63) - 1,
    True,
    False,
    None,
    "0.5",
    "",
    [],
    [0.5],
    {},
    {"x": 1},
    math.nan,
    math.inf,
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
    "{[{[{[{[{[{[{[{[{[{[{[{[",
    "]]]}}}",
    '"subject": "b"',
    "back\\slash",
    "\\",
    '"',
    "é",
    "ü-ß",
    "😀",
    "\u2028",
    "\x00\x1f",
    "\x7f\x85",
    "",
    " ",
    "x" * 40,
    Raw('"\\ud83d\\ude00"'),
    Raw('"\\u00e9"'),
    Raw('"\\u00E9"'),
    Raw('"\\/r\\/a"'),
    Raw('"\\"{[\\\\"'),
    Raw('"\\b\\f\\n\\r\\t"'),
    Raw('"\\u0000"'),
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
    False,
    True,
    Raw("false"),
    Raw("true"),
    {},
    {"timeout_s": None},
    {"timeout_s": 1},
    {"timeout_s": 2.5},
    {"fn_kwargs": {"k": [1, {"x": "é"}], "n": Raw("NaN")}, "timeout_s": 10},
    {"fn_kwargs": {}},
]
VALIDATIONS_BAD: list[Any] = [
    {"timeout_s": 0},
    {"timeout_s": -1},
    {"timeout_s": Raw("NaN")},
    {"timeout_s": Raw("1e400")},
    {"timeout_s": "5"},
    {"fn_kwargs": []},
    {"extra": 1},
    1,
    0,
    None,
    "true",
    [],
]

GOOD_TIMES = [
    "2026-01-31T12:00:00Z",
    "2026-01-31T12:00:00+05:30",
    "2026-01-31T12:00:00-00:00",
    "2026-01-31T12:00:00.123Z",
    "2026-01-31T12:00:00.123456Z",
    "2026-01-31T12:00:00.1234567Z",
    "2026-01-31T12:00:00.5+01:00",
    "2026-01-31",
    "2026-01-31 12:00:00",
    "20260131T120000Z",
    "2026-01-31T12:00Z",
    "2026-W05-6",
]
BAD_TIMES: list[Any] = [
    "2026-13-01T00:00:00Z",
    "yesterday",
    "",
    "2026-01-31T25:00:00Z",
    "2026-01-31T12:00:00ZZ",
    "2026-01-31T12:00:00+25:00",
    " 2026-01-31",
    "2026-01-31T12:00:00Z\n",
    5,
    Raw("1e3"),
    True,
]
RARE_RUN_IDS = ["é", "r\u0085", "r\u2028", 'q"t', "back\\slash", "x" * 256, " "]
BAD_RUN_IDS: list[Any] = ["", "x" * 257, "ctl\x01", "del\x7f", "nl\n", "tab\t", 5, None, ["a"]]
UNKNOWN_TYPES: list[Any] = [
    "ckptlog.report.v2",
    "ckptlog.report.v0",
    "ckptlog.report.v01",
    "ckptlog.foo.v1",
    "com.example.report",
    "ckptlog.Report.v1",
    "ckptlog.run_started.v2",
    "ckptlog.deletion_completed.v9",
    "ckptlog.deletion_completed.v0",
    "ckptlog.report.v1 ",
    "ckptlog.report",
    "",
    5,
    None,
]
EXTENSIONS_GOOD: list[tuple[str, Any]] = [
    ("traceparent", "00-abc-01"),
    ("x1", {"a": [1, 2]}),
    ("partitionkey", 5),
    ("comexampleext", None),
]
EXTENSIONS_BAD: list[tuple[str, Any]] = [("TraceParent", "x"), ("x_y", 1), ("ext-a", 1), ("", 1), ("é", 1)]
STYLES = [
    Style(),
    Style(),
    Style(", ", ": "),
    Style(" ,\t", " :\r"),
    Style(",\r", ":\t"),
    Style(ascii=True),
    Style(", ", ": ", ascii=True),
]
BAD_LINES: list[bytes] = [
    b"",
    b"   ",
    b"\t",
    b"\x0c",
    b"\x0b",
    b"\r",
    b" \r",
    b"{",
    b"}",
    b"not json",
    b'{"a":}',
    b"[1,2",
    b"nul",
    b"tru",
    b"{}",
    b"[]",
    b"1",
    b'"s"',
    b"null",
    b"true",
    b"-",
    b"01",
    b"\xff",
    b"\xc0\xaf",
    b"\xef\xbb\xbf{}",
    b'{"type": 5}',
    b'{"type": "ckptlog.report.v1"}',
    b'{"specversion": "1.0"}',
    b"[" * 70,
    b"[" * 70 + b"]" * 70,
    b"{}{}",
    b'{"a": 1} x',
    b"\x00",
    b'{"a": "\t"}',
]


# -- paths -------------------------------------------------------------------------------


def root_spellings(run: str) -> list[str]:
    """storage_path values for a run: the canonical one and equivalent spellings."""
    return [
        f"{ROOT}/{run}",
        f"{ROOT}/{run}",
        f"{ROOT}/{run}",
        f"/r/{run}",
        f"{ROOT}/{run}/",
        f"file:///r//{run}",
        f"file:///r/./{run}",
        f"r/{run}",
        f"local:///r/{run}",
        f"FILE:///r/{run}",
        ROOT,
    ]


def odd_roots(run: str) -> list[str]:
    """storage_path values that are outside the outer root, unsafe, empty, or elsewhere."""
    return [
        f"s3://bucket/{run}",
        f"S3://bucket/{run}",
        "file:///other",
        f"{ROOT}/../{run}",
        f"{ROOT}/{run}/sub",
        "",
        " ",
        f"memory://r/{run}",
        f"{ROOT}/{run}é",
    ]


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
        return path[len("file://") :]
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
        name = draw(
            st.sampled_from(
                [f"c{n}", f"c{n}/", f"ü{n}", f".h{n}", f"c{n}/x", f"..c{n}", f"c{n}..", "..", f"../c{n}", f"c{n}*"]
            )
        )
        path = base.rstrip("/") + sep + name if base.strip() else base + name
    else:
        path = draw(
            st.sampled_from(
                [
                    f"file:///elsewhere/c{n}",
                    f"s3://bucket/{run}/c{n}",
                    f"S3://bucket/{run}/c{n}",
                    f"file://r/{run}/c{n}",
                    f"relative/c{n}",
                    "",
                    " ",
                    "/",
                    "file:///",
                    ROOT,
                    f"{ROOT}/{run}",
                    "s3://bucket",
                    f"file:///r/{run}/c{n}\\x",
                ]
            )
        )
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
