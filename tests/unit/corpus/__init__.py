"""Event-log files whose fold is checked against golden outputs (tests/unit/foldfile/test_golden.py).

`cases()` is a hypothesis strategy of small logs (tens of lines) plus the settings and limits to
fold them with; `NASTY` holds hand-written logs. Between them they reach every fold rule of
contract §2-4 and every decode path of ckptlog/events/codec.py: the msgspec fast path, pydantic, the
diagnosis of each rejection, the v1 -> v2 upcast, the depth scan, the byte limit.

A log is written as raw bytes, not through `json.dumps`, so it can hold what only a hand-written
producer sends: duplicate keys, `NaN`/`Infinity` literals, odd number spellings (`1E2`, `-0`,
`1e400`, 30-digit integers), escapes (`\\u0061`, `\\/`, surrogate pairs, lone surrogates), odd
whitespace, CRLF line ends, invalid UTF-8, a last line without a newline.
"""

from tests.unit.corpus.generated import Case, cases, fold_settings
from tests.unit.corpus.handwritten import NASTY

__all__ = ["NASTY", "Case", "cases", "fold_settings"]
