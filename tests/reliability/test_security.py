"""SASL/SSL (issue 13, reliability suite 5): the processor and the clients against a local broker
whose SASL_SSL listener uses keys this test makes; the password never reaches a log line.

The broker is a second LocalBroker (real Apache Kafka jars) with a PLAINTEXT listener for
itself and a SASL_SSL (PLAIN) listener for ckptlog; the keys are a self-signed certificate for
127.0.0.1 made with the JDK's keytool, the client trusts exactly that certificate.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from processor.broker import LocalBroker
from processor.broker.config import BrokerSecurity, free_port
from processor.errors import CkptlogError
from processor.kafka import KafkaConnection
from processor.service.harness import expected_views, produce_events, running, wait_for_views, workload
from processor.service.settings import load_settings

pytestmark = pytest.mark.timeout(240)

USER, PASSWORD = "ckptlog-test", "s3cr3t-Passw0rd-never-logged"
KEYSTORE_PASSWORD = "keystore-pass-never-logged"


def make_keys(directory: Path) -> tuple[Path, Path]:
    """(the broker's PKCS12 keystore, the CA file clients trust: its own certificate in PEM)."""
    keytool = shutil.which("keytool")
    if keytool is None:
        pytest.fail("keytool (from the JDK the local broker needs) is not on PATH")
    keystore, cafile = directory / "broker.p12", directory / "ca.pem"
    common = ["-alias", "broker", "-keystore", str(keystore), "-storepass", KEYSTORE_PASSWORD]
    subprocess.run(
        [keytool, "-genkeypair", *common, "-keyalg", "RSA", "-keysize", "2048", "-dname", "CN=127.0.0.1",
         "-ext", "SAN=ip:127.0.0.1", "-storetype", "PKCS12", "-keypass", KEYSTORE_PASSWORD, "-validity", "2"],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run([keytool, "-exportcert", *common, "-rfc", "-file", str(cafile)], check=True, capture_output=True)
    return keystore, cafile


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(SASL_SSL bootstrap address, CA file) of a broker started for this module."""
    directory = tmp_path_factory.mktemp("secure-broker")
    keystore, cafile = make_keys(directory)
    security = BrokerSecurity(free_port(), keystore, KEYSTORE_PASSWORD, ((USER, PASSWORD),))
    broker = LocalBroker(directory / "broker", free_port(exclude=(security.port,)), security=security)
    try:
        broker.start()
    except CkptlogError as exc:
        pytest.fail(f"could not start a local broker with a SASL_SSL listener: {exc}")
    try:
        yield security.bootstrap, cafile
    finally:
        broker.stop()


def secure_settings(bootstrap: str, cafile: Path, tmp_path: Path, password: str = PASSWORD) -> Any:
    (tmp_path / "runs").mkdir(exist_ok=True)
    prefix = tmp_path.name[-12:].replace("_", "-")
    return load_settings(
        None,
        bootstrap_servers=bootstrap,
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_plain_username=USER,
        sasl_plain_password=password,
        ssl_cafile=str(cafile),
        group_id=f"secure-{prefix}",
        input_topic=f"{prefix}.events",
        checkpoints_topic=f"{prefix}.checkpoints",
        validations_topic=f"{prefix}.validations",
        watermarks_topic=f"{prefix}.watermarks",
        state_topic=f"{prefix}.state",
        dlq_topic=f"{prefix}.dlq",
        snapshots=str(tmp_path / "snapshots"),
        storage_root=(tmp_path / "runs").as_uri(),
        poll_timeout_ms=50,
    )


async def test_the_processor_works_over_sasl_ssl_and_never_logs_the_secrets(
    secure_broker: tuple[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    bootstrap, cafile = secure_broker
    settings = secure_settings(bootstrap, cafile, tmp_path)
    lines = workload((tmp_path / "runs").as_uri(), runs=2, reports=20, keep=2)
    expected = expected_views(lines, settings)
    conn = settings.connection(bootstrap)
    with caplog.at_level(logging.DEBUG):
        async with running(settings):
            await produce_events(conn, settings.input_topic, lines)
            views = await wait_for_views(conn, settings.state_topic, expected)
    assert views == expected
    logged = "\n".join(r.getMessage() for r in caplog.records) + capfd.readouterr().err
    assert "SASL_SSL" in repr(conn) or USER in repr(conn)  # the connection is described...
    for secret in (PASSWORD, KEYSTORE_PASSWORD):
        assert secret not in logged, "a secret reached the logs"
        assert secret not in repr(settings) and secret not in repr(conn) and secret not in str(settings)


async def test_a_wrong_password_is_a_clear_error_without_the_password(
    secure_broker: tuple[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bootstrap, cafile = secure_broker
    wrong = "wrong-password-also-secret"
    settings = secure_settings(bootstrap, cafile, tmp_path, password=wrong)
    with caplog.at_level(logging.DEBUG), pytest.raises(CkptlogError) as error:
        async with running(settings):
            pass
    message = str(error.value)
    assert bootstrap in message and wrong not in message
    assert wrong not in "\n".join(r.getMessage() for r in caplog.records)


async def test_a_client_without_the_ca_cannot_connect(secure_broker: tuple[str, Path], tmp_path: Path) -> None:
    """TLS is real: a client that does not trust the broker's certificate is refused."""
    bootstrap, _ = secure_broker
    conn = KafkaConnection(bootstrap, "untrusting", "SASL_SSL", "PLAIN", USER, PASSWORD)
    with pytest.raises(CkptlogError) as error:
        await produce_events(conn, "any-topic", [b"{}"])
    assert PASSWORD not in str(error.value)
