"""The generated section of docs/benchmarks.md: replaced between two markers, nothing else touched.

Others edit the rest of that file by hand, so the replacement must keep every byte outside the
markers (tests/unit/bench/test_markdown.py checks it), and tables are plain GitHub markdown.
"""

from __future__ import annotations

from collections.abc import Sequence

BEGIN = "<!-- bench.report:begin -->"
END = "<!-- bench.report:end -->"


class MarkerError(ValueError):
    """The markers are out of order or repeated: refusing to guess what to overwrite."""


def replace_section(document: str, body: str) -> str:
    """`document` with the text between the markers replaced by `body` (markers kept); the
    markers and `body` are appended at the end when the document has none."""
    begins, ends = document.count(BEGIN), document.count(END)
    if begins == ends == 0:
        sep = "" if document.endswith("\n") or not document else "\n"
        return f"{document}{sep}\n{BEGIN}\n{body.strip(chr(10))}\n{END}\n"
    if begins != 1 or ends != 1:
        raise MarkerError(f"expected one {BEGIN} and one {END}, found {begins} and {ends}")
    head, rest = document.split(BEGIN, 1)
    old, tail = rest.split(END, 1) if END in rest else (None, "")
    if old is None:
        raise MarkerError(f"{END} comes before {BEGIN}")
    return f"{head}{BEGIN}\n{body.strip(chr(10))}\n{END}{tail}"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table; cells are formatted with `cell` and pipes escaped."""
    if any(len(row) != len(headers) for row in rows):
        raise ValueError("every row needs one cell per header")
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def cell(value: object) -> str:
    """Numbers with thousands separators and sensible precision; None as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:  # NaN
            return "—"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value).replace("|", "\\|").replace("\n", " ")
