"""`ckptlog inspect --prefix/--limit`: 10,000 runs stay readable (issue 24 item 5)."""

from __future__ import annotations

from typing import Any

from ckptlog.cli.inspect import DEFAULT_LIMIT, _page


def test_runs_are_paged_in_id_order_and_filtered_by_prefix() -> None:
    views: dict[str, Any] = {f"run-{i:05d}": {"committed": i} for i in reversed(range(10_000))}
    views["other"] = {"committed": 0}
    shown, hidden = _page(views, None, DEFAULT_LIMIT)
    assert list(shown) == ["other"] + [f"run-{i:05d}" for i in range(DEFAULT_LIMIT - 1)]
    assert hidden == 10_001 - DEFAULT_LIMIT
    shown, hidden = _page(views, "run-0999", 0)
    assert list(shown) == [f"run-0999{i}" for i in range(10)] and hidden == 0
    assert _page(views, "nope", 5) == ({}, 0)
    assert len(_page(views, None, 0)[0]) == 10_001
