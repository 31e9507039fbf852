"""Writes `base.json` and `delta.json` beside this file: the schema 6 chain (a base and one delta)
that the build before snapshot schema 7 wrote of `log.py`'s log. Kept for how they were made; run
against a checkout of that build (`land` at 056978a), from this directory:

    PYTHONPATH=CHECKOUT python make.py

It imports `log.py` by its path, and `tests.factories` and `ckptlog` from the checkout.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ckptlog.processor.core import Fold, FoldSettings
from ckptlog.processor.core.delta import Capture, decode_chain
from ckptlog.processor.core.snapshot import SCHEMA_VERSION
from tests import factories as f

HERE = Path(__file__).resolve().parent


def main() -> None:
    assert SCHEMA_VERSION == 6, f"run it against the build that wrote schema 6, not {SCHEMA_VERSION}"
    spec = importlib.util.spec_from_file_location("schema6_log", HERE / "log.py")
    assert spec is not None and spec.loader is not None
    log = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(log)
    fold = Fold(FoldSettings(default_root=log.ROOT, dedup_window=log.WINDOW), track_changes=True)
    objects: list[bytes] = []
    for offset, raw in enumerate(log.LOG, 1):
        effects = fold.apply(f.event(raw))
        assert effects.rejection is None and not effects.duplicate, (offset, effects.rejection)
        if offset in (log.BASE_AT, len(log.LOG)):
            chain = decode_chain(objects).chain if objects else None
            capture = Capture(fold, "t", 0, offset, chain)
            while capture.step():
                pass
            objects.append(capture.encoded())
    assert set(fold.runs["a"].outstanding) == {f"{log.ROOT}/a/c10", f"{log.ROOT}/a/c11"} and "b" in fold.retired
    (HERE / "base.json").write_bytes(objects[0])
    (HERE / "delta.json").write_bytes(objects[1])


if __name__ == "__main__":
    main()
