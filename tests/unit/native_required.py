"""The compiled engine for tests that compare it with the Python fold.

`make venv` builds it whenever cargo is on PATH, so there a missing extension is a failure,
not a skip; only a machine without a Rust toolchain skips these tests."""

from __future__ import annotations

import shutil
from types import ModuleType

import pytest


def ckptlog_native() -> ModuleType:
    try:
        import ckptlog_native as module
    except ImportError:
        if shutil.which("cargo") is not None:
            pytest.fail(
                "the ckptlog_native extension is not installed although cargo is on PATH; run `make venv` "
                "(or pip install ./native)",
                pytrace=False,
            )
        pytest.skip("no Rust toolchain: the native engine is not built", allow_module_level=True)
    return module
