"""The storage contract on local backends: `file://`, a plain local path and `memory://`.

Also the ObjectStore behaviour that does not depend on a backend.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptlog.errors import StorageError
from ckptlog.processor.storage.objects import ObjectStore
from tests.storage_contract import Backend, StorageContract


@pytest.fixture(params=["file", "path", "memory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A fresh, empty location per test; memory:// gets a unique prefix and is wiped after."""
    if request.param == "file":
        yield Backend(f"file://{tmp_path}/store")
    elif request.param == "path":
        yield Backend(f"{tmp_path}/store")
    else:
        chosen = Backend(f"memory://ckptlog-test-{uuid.uuid4().hex}")
        yield chosen
        store = chosen.store()
        for name in store.list():
            store.delete(name)


class TestStorageContract(StorageContract):
    """Runs every contract test on each local backend."""


def test_local_write_leaves_no_temp_files(tmp_path: Path) -> None:
    store = ObjectStore(f"file://{tmp_path}")
    store.put_immutable("d/obj", b"data")
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["obj"]


def test_list_hides_interrupted_local_writes(tmp_path: Path) -> None:
    (tmp_path / ".tmp-dead-obj").write_bytes(b"partial")
    store = ObjectStore(str(tmp_path))
    store.put_immutable("obj", b"data")
    assert store.list() == ["obj"]


@pytest.mark.parametrize("url", ["nosuchprotocol://x/y", "file:///", "memory://"])
def test_unusable_base_urls_are_storage_errors(url: str) -> None:
    with pytest.raises(StorageError, match="nosuchprotocol|filesystem root") as err:
        ObjectStore(url)
    assert url in str(err.value)


def test_os_errors_become_storage_errors_naming_the_url(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_bytes(b"a file where a directory is needed")
    store = ObjectStore(f"file://{tmp_path}")
    with pytest.raises(StorageError, match="could not (read|write)") as err:
        store.put_immutable("blocker/obj", b"x")
    assert store.url("blocker/obj") in str(err.value)
