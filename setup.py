"""The compiled fold (docs/design.md "The compiled fold (mypyc)"): the modules in `COMPILED` built with mypyc
from the same source, when mypyc and a C compiler are here; pure Python otherwise (or with CKPTLOG_PURE=1).

One source: the .py files are what mypyc compiles and what runs where nothing is compiled. An editable install
(`make venv`) builds the extensions beside the sources, so `make clean` removes them; `make compiled` rebuilds
them after the sources changed (tests/conftest.py refuses a stale build: its module's source changed since)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent

COMPILED = [
    "ckptlog/processor/core/fold.py",
    "ckptlog/processor/core/retention.py",
    "ckptlog/processor/core/dedup.py",
    "ckptlog/processor/core/journal.py",
    "ckptlog/processor/core/outputs.py",
    "ckptlog/processor/core/scoring.py",
    "ckptlog/processor/core/ordering.py",
    "ckptlog/processor/core/marks.py",
    "ckptlog/processor/core/lifecycle.py",
    "ckptlog/processor/core/nesting.py",
    "ckptlog/processor/core/finishing.py",
    "ckptlog/processor/core/reopening.py",
    "ckptlog/processor/core/rejections.py",
    "ckptlog/processor/core/linked_roots.py",
    "ckptlog/processor/core/chain.py",
]
"""The modules compiled (measured one by one: docs/benchmarks.md); each left out is there for its reason."""

MANIFEST = HERE / "ckptlog" / "_compiled.json"
"""What was compiled, and each source's sha256 then (tests/conftest.py checks them: no stale extension runs)."""


SAID = HERE / "build" / "compiled-fold.txt"
"""The last line `_say` wrote (installers hide a build's output: `make compiled` shows it)."""


def _say(message: str) -> None:
    print(f"ckptlog: {message}", file=sys.stderr)
    SAID.parent.mkdir(exist_ok=True)
    with SAID.open("a") as said:
        said.write(f"ckptlog: {message}\n")


def _why_pure() -> str | None:
    """Why the fold stays pure Python here, or None to compile it."""
    if os.environ.get("CKPTLOG_PURE") == "1":
        return "CKPTLOG_PURE=1"
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return "mypyc is not installed"
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler, get_python_inc

    compiler: Any = new_compiler()
    customize_compiler(compiler)
    command = getattr(compiler, "compiler_so", None) or ["cc"]
    if shutil.which(command[0]) is None:
        return f"no C compiler ({command[0]})"
    if not (Path(get_python_inc()) / "Python.h").exists():
        return "no Python.h (the Python headers)"
    return None


def _write_manifest(modules: list[str]) -> None:
    digests = {path: hashlib.sha256((HERE / path).read_bytes()).hexdigest() for path in modules}
    MANIFEST.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")


class OptionalBuildExt(build_ext):
    """build_ext whose failure leaves the pure Python fold (a line saying why), not a failed install."""

    def run(self) -> None:
        try:
            super().run()
        except (Exception, SystemExit) as exc:  # a compiler that cannot build them: the sources still run
            _remove_build()
            _say(f"the compiled fold failed to build ({exc}); using the pure Python fold")


def _extensions() -> list[Any]:
    why = _why_pure()
    if why is None:
        try:
            from mypyc.build import mypycify

            os.chdir(HERE)  # mypyc names modules by their paths, relative to here
            extensions: list[Any] = mypycify(COMPILED, opt_level="3", verbose=False)
        except (Exception, SystemExit) as exc:  # mypyc refusing the sources (a type error, an unsupported construct)
            why = f"mypyc failed ({exc})"
        else:
            _write_manifest(COMPILED)
            _say(f"compiling {len(COMPILED)} modules with mypyc (CKPTLOG_PURE=1 to skip)")
            return extensions
    _remove_build()
    _say(f"{why}: using the pure Python fold")
    return []


def _remove_build() -> None:
    """Remove the manifest and every extension a build leaves beside the sources (a half-failed one, or an earlier
    one this install cannot vouch for): left behind, they would run unchecked, and the mypyc library they import
    is no longer mapped by an editable install built without it (ckptlog/compiled.py runs orphans from source)."""
    MANIFEST.unlink(missing_ok=True)
    suffixes = tuple(EXTENSION_SUFFIXES)
    modules = {(source.parent, source.stem) for source in (HERE / path for path in COMPILED)}
    for directory in {HERE, *(parent for parent, _ in modules)}:
        for file in directory.iterdir():
            stem = file.name.split(".", 1)[0]
            if file.name.endswith(suffixes) and ((directory, stem) in modules or stem.endswith("__mypyc")):
                file.unlink()


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
