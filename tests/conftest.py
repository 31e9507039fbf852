"""Storage fixtures for every test directory: real S3 (moto), Azure Blob (Azurite) and Google Cloud
Storage (fake-gcs-server) endpoints on 127.0.0.1, one per session (tests/emulators.py installs them).

Only storage fixtures live here; Kafka fixtures belong to tests/integration/conftest.py.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# gcsfs's default filesystem first asks GCS's gRPC control plane for the bucket's layout (60 s
# against an emulator, which has none, before it falls back to the JSON API): the plain one.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

pytest.register_assert_rewrite("tests.storage_contract")

from tests import compiled, emulators, shared_broker  # noqa: E402
from tests.storage_contract import AzureEndpoint, GcsEndpoint, S3Endpoint  # noqa: E402 — after the rewrite hook

LONG_MODULES = frozenset(
    {  # the modules of 30 s and more (`--durations`): `make test-long` runs them, `make test` the rest
        "tests/reliability/test_large_runs.py",
        "tests/reliability/test_crash_matrix.py",
        "tests/reliability/test_whole_system.py",
        "tests/reliability/test_broker_faults.py",
        "tests/reliability/test_security.py",
        "tests/integration/test_ray_resume.py",
        "tests/integration/test_ray_train.py",
        "tests/integration/test_trainers.py",
        "tests/integration/test_history_attacks.py",
        "tests/integration/test_ownership.py",
        "tests/integration/test_root_behind_symlink.py",
    }
)
ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """`pytest -n N`: one broker for all workers (tests/shared_broker.py)."""
    shared_broker.start(config)


def pytest_report_header() -> str:
    return f"ckptlog fold: {compiled.choice.RUNS} (ckptlog/compiled.py)"


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A `from_source` test (it replaces the fold's functions) runs against the sources where the fold is compiled."""
    if pyfuncitem.get_closest_marker("from_source") is None or not compiled.compiled():
        return None
    compiled.run_from_source(pyfuncitem.nodeid)
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the long modules `long` in one place, so moving a module between the two runs is one line."""
    for item in items:
        if Path(item.path).resolve().relative_to(ROOT).as_posix() in LONG_MODULES:
            item.add_marker(pytest.mark.long)


def pytest_unconfigure(config: pytest.Config) -> None:
    shared_broker.stop(config)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """moto's S3 server on a free 127.0.0.1 port for the session; dummy credentials."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint_url = f"http://{host}:{port}"
    credentials = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    client = boto3.client("s3", endpoint_url=endpoint_url, region_name="us-east-1", **credentials)

    def make_bucket() -> str:
        name = f"ckptlog-{uuid.uuid4().hex[:16]}"
        client.create_bucket(Bucket=name)
        return f"s3://{name}"

    options: dict[str, Any] = {
        "endpoint_url": endpoint_url,
        "key": credentials["aws_access_key_id"],
        "secret": credentials["aws_secret_access_key"],
        "client_kwargs": {"region_name": "us-east-1"},
    }
    try:
        yield S3Endpoint(endpoint_url=endpoint_url, storage_options=options, make_bucket=make_bucket)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def azure_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzureEndpoint]:
    """Azurite's blob service for the session, with the well-known development account's key."""
    from azure.storage.blob import BlobServiceClient

    try:
        emulators.azurite_bin()
    except emulators.Missing as exc:
        pytest.skip(str(exc))
    with emulators.azurite(tmp_path_factory.mktemp("azurite")) as blob_endpoint:
        connection_string = (
            f"DefaultEndpointsProtocol=http;AccountName={emulators.AZURITE_ACCOUNT};"
            f"AccountKey={emulators.AZURITE_KEY};BlobEndpoint={blob_endpoint};"
        )
        client = BlobServiceClient.from_connection_string(connection_string)

        def make_container() -> str:
            name = f"ckptlog-{uuid.uuid4().hex[:16]}"
            client.create_container(name)
            return f"abfs://{name}"

        options: dict[str, Any] = {"connection_string": connection_string}
        yield AzureEndpoint(blob_endpoint=blob_endpoint, storage_options=options, make_container=make_container)
        client.close()


@pytest.fixture(scope="session")
def gcs_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsEndpoint]:
    """fake-gcs-server for the session; anonymous access (the emulator checks no credentials)."""
    import gcsfs

    try:
        emulators.fake_gcs_bin()
    except emulators.Missing as exc:
        pytest.skip(str(exc))
    with emulators.fake_gcs(tmp_path_factory.mktemp("fake-gcs")) as endpoint_url:
        options: dict[str, Any] = {"endpoint_url": endpoint_url, "token": "anon", "project": "ckptlog-test"}
        fs = gcsfs.GCSFileSystem(**options)

        def make_bucket() -> str:
            name = f"ckptlog-{uuid.uuid4().hex[:16]}"
            fs.mkdir(name)
            return f"gs://{name}"

        yield GcsEndpoint(endpoint_url=endpoint_url, storage_options=options, make_bucket=make_bucket)
