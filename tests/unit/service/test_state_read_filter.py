"""`read_state_topic(runs=...)` skips the other runs' records before decoding them (`inspect RUN`
on a topic of 10,000 runs, issue 24 item 5) and returns what the unfiltered read returns for the
runs asked for: their VIEWs and their problems, however odd the keys."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptlog.events.state import Problem
from ckptlog.events.view import page_key
from ckptlog.kafka.reader import Record
from ckptlog.processor.core.fold import Fold
from ckptlog.processor.core.view import run_view
from ckptlog.processor.service import views
from ckptlog.processor.service.state_scan import StateScan
from ckptlog.processor.service.views import read_state_topic, run_of
from tests import factories as f


def _head(run: str) -> bytes:
    fold = Fold()
    fold.apply(f.event(f.started(run, root=f"file:///data/{run}")))
    fold.apply(f.event(f.report(run, path=f"file:///data/{run}/c0")))
    return json.dumps(run_view(fold.runs[run])).encode()


_KEYS_VALUES: list[tuple[bytes | None, bytes | None]] = [
    (b"a", _head("a")),
    (b"b", _head("b")),
    (b"a", b"{not json"),  # a's newest head is unreadable: a problem, the older head stays
    (page_key("b", 0, 0).encode(), b"[]"),  # an unreadable page of b
    (b"\xff\xfe", b"{}"),  # a key that is not UTF-8
    (b"c\x1fjunk", b"{}"),  # neither a run id nor a page key
    (None, b"{}"),
    (b"c", _head("c")),
]


class _Reader:
    def __init__(self, conn: Any, topic: str) -> None:
        self.topic = topic

    async def __aenter__(self) -> _Reader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def batches(self) -> AsyncIterator[list[Record]]:
        yield [Record(self.topic, 0, i, k, v, (), 1000 + i) for i, (k, v) in enumerate(_KEYS_VALUES)]


def test_run_of_names_the_run_a_problem_would() -> None:
    for key in (b"a", page_key("b", 3, 1).encode(), b"\xff\xfe", b"c\x1fjunk", b"c\x1fpage\x1fx\x1f0"):
        name = key.decode("utf-8", "backslashreplace")
        assert run_of(key) == Problem(name, "t[0]@0", "why").run_id
    assert run_of(page_key("run-7", 0, 2).encode()) == "run-7"


@pytest.mark.parametrize("runs", [["a"], ["b"], ["c", "b"], ["\\xff\\xfe"], ["c\x1fjunk"], ["nobody"]])
def test_a_filtered_read_is_the_unfiltered_one_cut(monkeypatch: pytest.MonkeyPatch, runs: list[str]) -> None:
    monkeypatch.setattr(views, "TopicReader", _Reader)
    every = asyncio.run(read_state_topic(Any, "t", ()))
    assert set(every.views) == {"a", "b", "c"}  # a: its older head; b: its head needs no page
    assert sorted(p.run_id for p in every.problems) == ["\\xff\\xfe", "a", "b", "c\x1fjunk"]
    some = asyncio.run(read_state_topic(Any, "t", runs))
    assert some.views == {r: v for r, v in every.views.items() if r in runs}
    assert some.problems == [p for p in every.problems if p.run_id in runs]
    assert some.written_ms == {r: t for r, t in every.written_ms.items() if r in runs}


# -- skipping the heads a later one replaces (ckptlog/processor/service/state_scan.py) --------------------

_RUNS = ("a", "b", "\\xff")  # "\\xff" is also the problem name of the key b"\xff"


def _head_after(run: str, reports: int) -> bytes:
    fold = Fold()
    fold.apply(f.event(f.started(run, root=f"file:///data/r{len(run)}{ord(run[0])}")))
    for i in range(reports):
        fold.apply(f.event(f.report(run, path=f"file:///data/r{len(run)}{ord(run[0])}/c{i}")))
    return json.dumps(run_view(fold.runs[run])).encode()


_HEADS = {run: [_head_after(run, n) for n in (1, 2, 3)] for run in _RUNS}


def _record(kind: int, run: int, at: int, variant: int) -> tuple[bytes | None, bytes | None, tuple[Any, ...]]:
    name = _RUNS[run]
    value = b"{broken" if variant == 3 else _HEADS[name][variant]
    header = (("__ckptlog.input.offset", str(at).encode()),)
    return [
        (name.encode(), value, header),  # a head with the offset header
        (name.encode(), value, header),
        (name.encode(), value, header),
        (name.encode(), value, ()),  # a head without it
        (name.encode(), None, ()),  # a tombstone
        (page_key(name, at % 2, 0).encode(), None if variant < 2 else b"[]", ()),  # a page part (gone, unreadable)
        (b"\xff", b"{}", ()),
        (None, b"{}", ()),
    ][kind]


class _Plain(StateScan):
    """Every record taken as it comes: what read_state_topic did before the skipping."""

    def add(self, record: Record) -> None:
        self._take(record)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2), st.integers(0, 4), st.integers(0, 3)), max_size=14),
    st.sampled_from([(), ("a",), ("\\xff", "b")]),
)
def test_skipping_heads_reads_what_taking_every_record_reads(specs: list[Any], runs: tuple[str, ...]) -> None:
    records = [Record("t", 0, i, *_record(*spec), 1000 + i) for i, spec in enumerate(specs)]

    class Reader(_Reader):
        async def batches(self) -> AsyncIterator[list[Record]]:
            yield records[:5]
            yield records[5:]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(views, "TopicReader", Reader)
        skipping = asyncio.run(read_state_topic(Any, "t", runs))
        patch.setattr(views, "StateScan", _Plain)
        every = asyncio.run(read_state_topic(Any, "t", runs))
    assert skipping == every
