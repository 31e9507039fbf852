"""Which fold a process runs (ckptlog/compiled.py): the compiled one as built, its sources with CKPTLOG_PURE=1 or
when a source changed since the build (all of them: compiled modules call one another directly), never a stale
extension. Each case is a new process: the choice is made once, at `import ckptlog`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from ckptlog import compiled

PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("probe", {source!r})
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)
probe.MANIFEST = probe.Path({manifest!r})
print(json.dumps({{"probe": probe.choose()}}))
import ckptlog, ckptlog.processor.core.fold as fold, ckptlog.processor.core.retention as retention
print(json.dumps({{"runs": ckptlog.compiled.RUNS, "fold": fold.__file__, "retention": retention.__file__}}))
"""

FILES = """
import json, ckptlog, ckptlog.processor.core.fold as fold, ckptlog.processor.core.retention as retention
print(json.dumps({"runs": ckptlog.compiled.RUNS, "fold": fold.__file__, "retention": retention.__file__}))
"""


def run(code: str, **env: str) -> tuple[dict[str, str], str]:
    done = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, check=True
    )
    out: dict[str, str] = {}
    for line in done.stdout.splitlines():
        out.update(json.loads(line))
    return out, done.stderr


def test_this_checkout_runs_the_fold_it_compiled() -> None:
    """`make venv` compiles the fold where mypyc and a C compiler are (CI's machine: the build under test)."""
    assert compiled.manifest(), "the fold is not compiled here: `make compiled` says why"
    out, err = run(FILES, CKPTLOG_PURE="")
    assert out["runs"] == "compiled"
    assert out["fold"].endswith(".so") and out["retention"].endswith(".so")
    assert "changed since" not in err


def test_pure_runs_every_compiled_module_from_its_source_quietly() -> None:
    out, err = run(FILES, CKPTLOG_PURE="1")
    assert out["runs"] == "sources (CKPTLOG_PURE=1)"
    assert out["fold"].endswith("fold.py") and out["retention"].endswith("retention.py")
    assert err == ""


def test_a_source_changed_since_the_build_runs_all_of_them_from_source_and_says_so(tmp_path: object) -> None:
    digests = compiled.manifest()
    assert "ckptlog/processor/core/fold.py" in digests
    manifest = os.path.join(str(tmp_path), "_compiled.json")
    with open(manifest, "w") as out_file:
        json.dump({**digests, "ckptlog/processor/core/fold.py": "0" * 64}, out_file)
    out, err = run(PROBE.format(source=compiled.__file__, manifest=manifest), CKPTLOG_PURE="")
    assert out["probe"] == "sources (ckptlog/processor/core/fold.py changed since compiled)"
    assert out["fold"].endswith("fold.py") and out["retention"].endswith("retention.py"), "all, not only the edited"
    assert "ckptlog/processor/core/fold.py changed since the fold was compiled" in err and "make compiled" in err


def test_stale_names_changed_and_missing_sources_only() -> None:
    digests = compiled.manifest()
    assert compiled.stale(digests) == []
    changed = {**digests, "ckptlog/processor/core/fold.py": "0" * 64, "ckptlog/processor/core/gone.py": "1" * 64}
    assert compiled.stale(changed) == ["ckptlog/processor/core/fold.py", "ckptlog/processor/core/gone.py"]


def probe(tmp_path: Path, content: bytes | None) -> tuple[dict[str, str], str]:
    """`choose` with this manifest (None: none) beside this checkout's extensions, then which files run."""
    manifest = tmp_path / "_compiled.json"
    if content is not None:
        manifest.write_bytes(content)
    return run(PROBE.format(source=compiled.__file__, manifest=str(manifest)), CKPTLOG_PURE="")


def test_extensions_without_a_manifest_run_the_sources_and_say_so(tmp_path: Path) -> None:
    """`make venv frameworks` on a fresh clone: the second install (build isolation, no mypyc) dropped the manifest
    and left the extensions: they ran unchecked (stale or not) and CKPTLOG_PURE=1 ran them too."""
    assert compiled.manifest(), "the fold is not compiled here: `make compiled` says why"
    out, err = probe(tmp_path, None)
    assert out["probe"].startswith("sources (")
    assert out["fold"].endswith("fold.py") and out["retention"].endswith("retention.py")
    assert "compiled extensions without _compiled.json" in err and "make compiled" in err


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe",
        b"[1, 2]",
        b'"x"',
        b'{"ckptlog/processor/core/fold.py": 5}',
        json.dumps({"../../etc/passwd": "0" * 64}).encode(),
        json.dumps({"/etc/passwd": "0" * 64}).encode(),
        json.dumps({"ckptlog/../../../etc/passwd": "0" * 64}).encode(),
    ],
)
def test_a_garbage_manifest_never_crashes_import_nor_reads_outside(tmp_path: Path, content: bytes) -> None:
    """An unreadable manifest, or one naming a file outside the package: every extension runs from source (no
    digest was checked), `import ckptlog` works, and no named path is opened."""
    out, err = probe(tmp_path, content)
    assert out["probe"].startswith("sources (")
    assert out["fold"].endswith("fold.py") and out["retention"].endswith("retention.py")
    assert "_compiled.json" in err and "make compiled" in err


def test_the_manifest_is_read_only_for_paths_of_modules_in_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[Path] = []
    monkeypatch.setattr(Path, "read_bytes", lambda self: opened.append(self))
    with pytest.raises(ValueError):
        compiled.checked({"../../etc/passwd": "0" * 64})
    assert opened == []


def test_every_compiled_module_is_where_extensions_are_looked_for() -> None:
    """`compiled.extensions` lists one directory: setup.py compiles no module elsewhere."""
    text = (compiled.ROOT / "setup.py").read_text()
    modules = re.findall(r'"(ckptlog/[^"]+[.]py)"', text)
    assert "ckptlog/processor/core/fold.py" in modules
    assert all(m.rsplit("/", 1)[0] == compiled.PACKAGE for m in modules)
    assert {m.removesuffix(".py").replace("/", ".") for m in compiled.manifest()} <= compiled.extensions()


SETUP_WITHOUT_MYPYC = """
import sys, setuptools
sys.modules["mypyc"] = None  # an isolated build environment: no mypyc
setuptools.setup = lambda **kwargs: print(len(kwargs["ext_modules"]))
exec(compile(open("setup.py").read(), "setup.py", "exec"), {"__file__": "setup.py", "__name__": "__main__"})
"""


def test_an_install_that_cannot_compile_removes_the_build_it_cannot_vouch_for(tmp_path: Path) -> None:
    """On a fresh clone `make venv frameworks` compiled the fold, then the frameworks install (build isolation: no
    mypyc) deleted the manifest and left the extensions: unchecked, and the `ckptlog` script failed to import the
    mypyc library the new editable install no longer maps. setup.py removes what it would have built (no other
    file) and `make frameworks` compiles again."""
    (tmp_path / "setup.py").write_bytes((compiled.ROOT / "setup.py").read_bytes())
    suffix = EXTENSION_SUFFIXES[0]
    built = [tmp_path / f"0123abcd__mypyc{suffix}"]
    for path in compiled.manifest():
        source = tmp_path / path
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_bytes((compiled.ROOT / path).read_bytes())
        built.append(source.with_name(source.stem + suffix))
    others = [tmp_path / compiled.PACKAGE / f"state{suffix}", tmp_path / compiled.PACKAGE / "fold.pyi"]
    for path in [*built, *others, tmp_path / "ckptlog" / "_compiled.json"]:
        path.write_bytes(b"x")
    done = subprocess.run(
        [sys.executable, "-c", SETUP_WITHOUT_MYPYC],
        cwd=tmp_path,
        env={**os.environ, "CKPTLOG_PURE": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "0", "nothing to build"
    assert "mypyc is not installed: using the pure Python fold" in done.stderr
    assert not (tmp_path / "ckptlog" / "_compiled.json").exists()
    assert [p for p in built if p.exists()] == []
    assert all(p.exists() for p in others)
