"""objects.mapped_error: the one mapping of backend failures to StorageError, used by the
`mapped_errors` context manager and, without one, by the deleter's walk per path (tree.py)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from ckptlog.errors import ObjectMissing, StorageError
from ckptlog.processor.storage.claims import Claimant
from ckptlog.processor.storage.objects import mapped_error, mapped_errors
from ckptlog.processor.storage.safety import Stop
from ckptlog.processor.storage.tree import remove_all


def test_each_kind_of_failure_maps_as_the_context_manager_maps_it() -> None:
    own = StorageError("already ours")
    assert mapped_error(own, "file:///r/a", "delete") is own
    missing = mapped_error(FileNotFoundError(errno.ENOENT, "gone"), "file:///r/a", "read")
    assert isinstance(missing, ObjectMissing) and "could not read file:///r/a: it does not exist" in str(missing)
    assert isinstance(missing.__cause__, FileNotFoundError) and missing.__suppress_context__
    failed = mapped_error(PermissionError(errno.EACCES, "denied"), "file:///r/a", "delete")
    assert type(failed) is StorageError and "could not delete file:///r/a: PermissionError" in str(failed)
    assert isinstance(failed.__cause__, PermissionError)
    stop, other = Stop(None), ValueError("a bug")
    assert mapped_error(stop, "u", "delete") is stop and mapped_error(other, "u", "delete") is other
    for exc in (own, FileNotFoundError(errno.ENOENT, "gone"), PermissionError(errno.EACCES, "x"), other):
        expected = type(mapped_error(exc, "file:///r/a", "check"))
        with pytest.raises(expected) as raised, mapped_errors("file:///r/a", "check"):
            raise exc
        assert type(raised.value) is expected and (raised.value is exc or raised.value.__cause__ is exc)


def test_the_walk_reports_a_failing_checkpoint_as_a_storage_failure_naming_it(tmp_path: Path) -> None:
    """A checkpoint the walk cannot open for a reason other than gone or a link (here a name longer than
    the filesystem allows, which check 1 refuses before any walk): the OSError becomes the path's
    outcome, a message naming the URL (the Deleter retries it), and the next path is still deleted."""
    root = tmp_path / "run-0"
    (root / "ckpt-2").mkdir(parents=True)
    me, base = Claimant("run-0"), root.as_uri()
    long_url = f"{base}/{'x' * 300}"
    outcomes = remove_all([(long_url, base, me), (f"{base}/ckpt-2", base, me)], {})
    assert isinstance(outcomes[0], str) and outcomes[0].startswith(f"could not delete {long_url}: OSError")
    assert outcomes[1] is None and not (root / "ckpt-2").exists() and root.is_dir()
