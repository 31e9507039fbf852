"""The generated section replaces only what lies between its markers."""

from __future__ import annotations

import pytest

from bench.markdown import BEGIN, END, MarkerError, cell, replace_section, table

HAND = "# Benchmarks\n\nHand-written text | with pipes, trailing spaces   \n\n## Other\n\ncrlf line\r\nend"


def test_markers_appended_when_missing_and_the_rest_kept_byte_for_byte() -> None:
    out = replace_section(HAND, "generated\n")
    assert out.startswith(HAND)
    assert out[len(HAND) :] == f"\n\n{BEGIN}\ngenerated\n{END}\n"


def test_only_the_text_between_the_markers_changes() -> None:
    before, after = HAND + f"\n{BEGIN}\n", f"{END}\ntail written by hand  \r\nmore\n"
    doc = before + "old table\nold plot\n" + after
    out = replace_section(doc, "new table")
    assert out == before + "new table\n" + after


def test_replacing_twice_is_stable() -> None:
    once = replace_section(HAND, "body")
    assert replace_section(once, "body") == once
    assert replace_section(replace_section(once, "other"), "body") == once


def test_empty_document_gets_just_the_section() -> None:
    assert replace_section("", "x") == f"\n{BEGIN}\nx\n{END}\n"


@pytest.mark.parametrize(
    "doc",
    [f"{BEGIN}\n{BEGIN}\n{END}", f"{END}\n{BEGIN}\n", f"{BEGIN}\nno end", f"{BEGIN}{END}{END}"],
)
def test_ambiguous_markers_are_refused(doc: str) -> None:
    with pytest.raises(MarkerError):
        replace_section(doc, "x")


def test_table_layout_and_cells() -> None:
    text = table(("size", "rate", "note"), [[1000, 12345.678, "a|b"], [None, 0.5, 3.25]])
    assert text.splitlines() == [
        "| size | rate | note |",
        "|---|---|---|",
        "| 1,000 | 12,346 | a\\|b |",
        "| — | 0.50 | 3.25 |",
    ]


def test_table_refuses_ragged_rows() -> None:
    with pytest.raises(ValueError):
        table(("a", "b"), [[1]])


@pytest.mark.parametrize(
    ("value", "text"),
    [(12.345, "12.3"), (float("nan"), "—"), (True, "yes"), (-250.4, "-250"), ("x\ny", "x y"), (7, "7")],
)
def test_cell(value: object, text: str) -> None:
    assert cell(value) == text
