"""The storage contract against S3 over real HTTP: moto's server on 127.0.0.1 via s3fs.

Each test gets its own bucket; no Kafka fixture is requested here.
"""

from __future__ import annotations

import pytest

from ckptlog.errors import StorageError
from ckptlog.processor.storage.objects import ObjectStore
from tests.storage_contract import Backend, RemoteStorageContract, S3Endpoint


@pytest.fixture
def backend(s3_endpoint: S3Endpoint) -> Backend:
    """A fresh bucket per test, with a key prefix so the base is not the bucket root."""
    return Backend(f"{s3_endpoint['make_bucket']()}/ckptlog", dict(s3_endpoint["storage_options"]))


class TestS3StorageContract(RemoteStorageContract):
    """Runs every contract test on S3."""


def test_missing_bucket_is_a_storage_error_naming_the_url(s3_endpoint: S3Endpoint) -> None:
    store = ObjectStore("s3://ckptlog-no-such-bucket/base", s3_endpoint["storage_options"])
    with pytest.raises(StorageError, match="could not (read|write)") as err:
        store.put_immutable("obj", b"x")
    assert "s3://ckptlog-no-such-bucket/base/obj" in str(err.value)


def test_unreachable_endpoint_is_a_storage_error(s3_endpoint: S3Endpoint) -> None:
    options = dict(
        s3_endpoint["storage_options"],
        endpoint_url="http://127.0.0.1:9",
        config_kwargs={"retries": {"max_attempts": 1}, "connect_timeout": 1},
    )
    store = ObjectStore("s3://any-bucket/base", options)
    with pytest.raises(StorageError, match="s3://any-bucket/base/obj"):
        store.get("obj")
