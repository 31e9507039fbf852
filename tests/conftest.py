"""Storage fixtures for every test directory: a real S3 protocol endpoint (moto) on 127.0.0.1.

Only storage fixtures live here; Kafka fixtures belong to tests/integration/conftest.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.register_assert_rewrite("tests.storage_contract")

from tests.storage_contract import S3Endpoint  # noqa: E402 — after the rewrite hook


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
