"""The one bounded JSON decoder every reader uses (ckptlog.events.codec.decode_json) and the state table
built on it (ckptlog.events.state.StateTable): never a raise, never unbounded recursion (issue 20 item 6)."""

from __future__ import annotations

import json

import pytest

from ckptlog.events.codec import DEFAULT_LIMITS, Undecodable, decode_json, decode_object
from ckptlog.events.rejections import Reason
from ckptlog.events.state import StateTable
from ckptlog.events.view import page_key
from tests.unit.clients.test_hostile_records import DEEP, HOSTILE, HUGE
from tests.unit.clients.test_views import view


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_bounded_decoder_never_raises(name: str) -> None:
    value = decode_object(HOSTILE[name], DEFAULT_LIMITS)
    assert isinstance(value, Undecodable | dict)
    if name != "not_a_view":
        assert isinstance(value, Undecodable), value


def test_what_the_unbounded_decoder_did_with_the_deep_record() -> None:
    """The defect, as the readers met it: json.loads recurses once per level."""
    with pytest.raises(RecursionError):
        json.loads(DEEP)
    assert str(decode_json(DEEP)) == "too deep (>64)"
    assert decode_json(HUGE).code == Reason.PAYLOAD_TOO_LARGE  # type: ignore[union-attr]
    assert str(decode_json(b"\xff")) == "not UTF-8 (byte 0)"
    assert decode_json(b'{"loss": NaN, "x": -Infinity}') == {
        "loss": pytest.approx(float("nan"), nan_ok=True),
        "x": float("-inf"),
    }


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_head_is_a_problem_and_the_last_readable_view_stays(name: str) -> None:
    table = StateTable()
    assert table.take("state[0]@0", b"r", json.dumps(view(2, paths=("/a",))).encode()) == "r"
    assert table.take("state[0]@1", b"r", HOSTILE[name]) is None
    found = table.view("r")
    assert isinstance(found, tuple) and found[1].committed == 2
    assert table.problems["r"].at == "state[0]@1" and table.problems["r"].to_json()["value"] is None


def test_a_paged_run_with_an_unreadable_page_it_needs_is_a_problem_not_a_wrong_view() -> None:
    head = {**view(40), "pages": {"span": 32}}
    entry = {"path": "/p", "metrics": {}, "status": "COMMITTED", "report_index": 33, "sort": None}
    page = {"run": "r", "page": 1, "part": 0, "parts": 1, "checkpoints": [entry]}
    table = StateTable()
    table.take("s[0]@0", page_key("r", 1, 0).encode(), json.dumps(page).encode())
    table.take(
        "s[0]@1",
        page_key("r", 0, 0).encode(),
        b'{"run": "r", "page": 0, "part": 0, "parts": 1, "checkpoints": [{"sort": "x"}]}',
    )
    table.take("s[0]@2", b"r", json.dumps(head).encode())
    found = table.view("r")
    assert not isinstance(found, tuple) and found is not None and "a page its VIEW needs" in found.reason
    table.take("s[0]@3", page_key("r", 0, 0).encode(), None)  # the bad page tombstoned: the run reads again
    found = table.view("r")
    assert isinstance(found, tuple) and [c["path"] for c in found[0]["checkpoints"]] == ["/p"]


def test_the_readers_depth_is_the_processors_scan_exactly() -> None:
    """depth_of takes a shortcut for values without a backslash; it must agree with the scan the
    processor rejects by, on any bytes (valid JSON or not)."""
    import random

    from ckptlog.events.codec import _depth, depth_of

    rng = random.Random(7)
    for alphabet in (b'{}[]"a\n', b'{}[]"\\a'):
        for _ in range(20_000):
            raw = bytes(rng.choice(alphabet) for _ in range(rng.randrange(40)))
            assert depth_of(raw) == _depth(raw), raw
    assert depth_of(DEEP) == _depth(DEEP) == 20_000
