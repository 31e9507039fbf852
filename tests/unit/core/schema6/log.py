"""The log the schema 6 chain beside this file was folded from (by `make.py`, under the build that
wrote schema 6): `tests/unit/core/test_schema6_chain.py` restores the chain under this build and
folds the same log to compare.

Run `a` reports in order as a Reporter does (`ck1:r:0:{n}:a`), past a window of `WINDOW` ids, with a
numbered deletion completion for each eviction (which schema 6 remembered among its ids) and a
foreign id; run `b` finishes and retires (schema 6 kept its state with an empty list of ids); after
the base, `a` goes on (one number out of order, a foreign id) and run `c` starts reporting as a
trainer integration does (`ck1:a:{attempt}:{generation}:{n}:c`).
"""

from __future__ import annotations

from tests import factories as f

ROOT = "file:///data"
WINDOW = 8
BASE_AT = 30
"""The offset the base resumes at: the log's first BASE_AT records are in it, the rest in the delta."""


def _a(n: int) -> bytes:
    return f.report("a", {"acc": n}, f"{ROOT}/a/c{n}", event_id=f"ck1:r:0:{n}:a")


def _log() -> list[bytes]:
    out = [f.started("a", f"{ROOT}/a", keep=2, attr="acc", event_id="start-a")]
    for n in range(12):
        out.append(_a(n))
        if n >= 2:  # keep=2 by a rising score: report n evicts c{n-2}, its deletion completed next
            out.append(f.settled("a", [(f"{ROOT}/a/c{n - 2}", n - 2)], event_id=f"deleted:a:{n - 2}"))
    out.append(f.report("a", {"loss": 0.5}, event_id="foreign-a-1"))
    out += [f.started("b", f"{ROOT}/b", event_id="start-b")]
    out += [f.report("b", {"acc": n}, f"{ROOT}/b/c{n}", event_id=f"ck1:r:0:{n}:b") for n in range(3)]
    out += [f.report("b", {"loss": 1}, event_id="foreign-b"), f.finished("b", event_id="finish-b")]
    assert len(out) == BASE_AT
    out += [_a(12), _a(14), f.report("a", {"loss": 0.1}, event_id="foreign-a-2")]  # 13 not yet: 14 out of order
    out += [f.report("c", {"loss": n}, event_id=f"ck1:a:job-1:0:{n}:c") for n in range(3)]
    out.append(f.report("c", {"loss": 9}, event_id="foreign-c"))
    return out


LOG = _log()
