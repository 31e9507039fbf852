"""The storage contract against Azure Blob over real HTTP: Azurite (npm) on 127.0.0.1 via adlfs.

Each test gets its own container and a key prefix below it; the credentials are Azurite's
well-known development account, given as an adlfs `connection_string` storage option (what
`CKPTLOG_CHECKPOINT_STORAGE_OPTIONS='{"abfs": {"connection_string": ...}}'` gives a processor).
No Kafka fixture is requested here.
"""

from __future__ import annotations

import pytest

from ckptlog.errors import StorageError
from ckptlog.processor.storage.objects import ObjectStore
from tests.storage_contract import AzureEndpoint, Backend, RemoteStorageContract


@pytest.fixture
def backend(azure_endpoint: AzureEndpoint) -> Backend:
    """A fresh container per test, with a prefix so the base is not the container root."""
    return Backend(f"{azure_endpoint['make_container']()}/ckptlog", dict(azure_endpoint["storage_options"]))


class TestAzureStorageContract(RemoteStorageContract):
    """Runs every contract test on Azure Blob (Azurite)."""


def test_missing_container_is_a_storage_error_naming_the_url(azure_endpoint: AzureEndpoint) -> None:
    store = ObjectStore("abfs://ckptlog-no-such-container/base", azure_endpoint["storage_options"])
    with pytest.raises(StorageError, match="could not (read|write)") as err:
        store.put_immutable("obj", b"x")
    assert "abfs://ckptlog-no-such-container/base/obj" in str(err.value)


def test_a_wrong_account_key_is_a_storage_error(azure_endpoint: AzureEndpoint) -> None:
    wrong = azure_endpoint["storage_options"]["connection_string"].replace("AccountKey=Eby8", "AccountKey=Xby8")
    store = ObjectStore(f"{azure_endpoint['make_container']()}/base", {"connection_string": wrong})
    with pytest.raises(StorageError, match="/base/obj"):
        store.get("obj")
