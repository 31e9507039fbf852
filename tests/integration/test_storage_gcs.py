"""The storage contract against Google Cloud Storage's JSON API over real HTTP: fake-gcs-server
(built from the Go module proxy) on 127.0.0.1 via gcsfs.

Each test gets its own bucket and a key prefix below it; the emulator takes anonymous requests
(`token="anon"`), so credentials are not exercised here (docs/faq.md says how they reach gcsfs).
No Kafka fixture is requested here.
"""

from __future__ import annotations

import pytest

from ckptlog.errors import StorageError
from ckptlog.processor.storage.objects import ObjectStore
from tests.storage_contract import Backend, GcsEndpoint, RemoteStorageContract


@pytest.fixture
def backend(gcs_endpoint: GcsEndpoint) -> Backend:
    """A fresh bucket per test, with a prefix so the base is not the bucket root."""
    return Backend(f"{gcs_endpoint['make_bucket']()}/ckptlog", dict(gcs_endpoint["storage_options"]))


class TestGcsStorageContract(RemoteStorageContract):
    """Runs every contract test on GCS (fake-gcs-server)."""


def test_missing_bucket_is_a_storage_error_naming_the_url(gcs_endpoint: GcsEndpoint) -> None:
    store = ObjectStore("gs://ckptlog-no-such-bucket/base", gcs_endpoint["storage_options"])
    with pytest.raises(StorageError, match="could not (read|write)") as err:
        store.put_immutable("obj", b"x")
    assert "gs://ckptlog-no-such-bucket/base/obj" in str(err.value)
