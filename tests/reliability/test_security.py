"""SASL/SSL (issue 13, reliability suite 5): the processor and the clients against a local broker
whose SASL_SSL listener uses keys this test makes; the password never reaches a log line.

The broker is a second LocalBroker (real Apache Kafka jars) with a PLAINTEXT listener for
itself and a SASL_SSL (PLAIN) listener for ckptlog; the keys are a self-signed certificate for
127.0.0.1 made with the JDK's keytool, the client trusts exactly that certificate.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pickle
import shutil
import subprocess
import sys
from asyncio.subprocess import PIPE
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ckptlog import AsyncEvaluator, AsyncReader, AsyncReporter, ConnectionSettings, Reader, Reporter, Topics
from ckptlog.broker import LocalBroker
from ckptlog.broker.config import BrokerSecurity, free_port
from ckptlog.errors import CkptlogError
from ckptlog.integrations.ray import CkptlogCallback
from ckptlog.kafka import KafkaConnection
from ckptlog.processor.service.harness import expected_views, produce_events, running, wait_for_views, workload
from ckptlog.processor.service.settings import load_settings

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


# -- every client over SASL_SSL (issue 21 #1): the same connection settings as `ckptlog run` ----------


def client_settings(bootstrap: str, cafile: Path) -> ConnectionSettings:
    return ConnectionSettings(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_plain_username=USER,
        sasl_plain_password=PASSWORD,
        ssl_cafile=str(cafile),
    )


def client_env(bootstrap: str, cafile: Path) -> dict[str, str]:
    """What a shell, a pod or a Ray controller sets: the CKPTLOG_* variables `ckptlog run` reads."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CKPTLOG_", "KAFKA_"))}
    return {
        **clean,
        "CKPTLOG_BOOTSTRAP_SERVERS": bootstrap,
        "CKPTLOG_SECURITY_PROTOCOL": "SASL_SSL",
        "CKPTLOG_SASL_PLAIN_USERNAME": USER,
        "CKPTLOG_SASL_PLAIN_PASSWORD": PASSWORD,
        "CKPTLOG_SSL_CAFILE": str(cafile),
    }


async def cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ckptlog", *args, env=env, stdout=PIPE, stderr=PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def ray_controller(run_id: str, root: Path) -> Any:
    """What `CkptlogCallback.after_controller_start` reads of Ray's TrainRunContext."""
    storage = SimpleNamespace(
        experiment_fs_path=str(root), storage_filesystem=SimpleNamespace(type_name="local"), experiment_dir_name=run_id
    )
    return SimpleNamespace(run_config=SimpleNamespace(name=run_id, storage_context=storage, checkpoint_config=None))


async def test_every_client_works_over_sasl_ssl(secure_broker: tuple[str, Path], tmp_path: Path) -> None:
    """Reporter, AsyncReporter (confirmed), AsyncEvaluator, AsyncReader, Reader, the Ray callback and the CLI
    commands, each given the connection by `connection=` or by the CKPTLOG_* environment."""
    bootstrap, cafile = secure_broker
    settings = secure_settings(bootstrap, cafile, tmp_path)
    conn, env = client_settings(bootstrap, cafile), client_env(bootstrap, cafile)
    topics = Topics(settings.input_topic, settings.validations_topic, settings.state_topic, settings.watermarks_topic)
    root, run = tmp_path / "runs" / "secure", "secure-run"
    root.mkdir()
    confirm = {"confirm": True, "processor_group": settings.group_id, "dlq_topic": settings.dlq_topic}
    async with running(settings):
        evaluator = AsyncEvaluator(
            lambda path: {"acc": 0.5}, connection=conn, topics=topics, group_id=f"{settings.group_id}-e"
        )
        evaluating = asyncio.create_task(evaluator.run())
        try:
            async with AsyncReporter(run, connection=conn, topic=topics.events, **confirm) as reporter:
                await reporter.run_started(root, num_to_keep=3)
                await reporter.report({"loss": 1.0}, root / "c0", validation=True)

            def sync_clients() -> int:
                with Reporter(run, connection=conn, topic=topics.events, first_index=1, **confirm) as sync:
                    sync.report({"loss": 0.9}, root / "c1")
                with Reader(connection=conn, topics=topics) as sync_reader:
                    return len(sync_reader.get_all_reported_checkpoints(run, 2, "committed", timeout_s=60))

            assert await asyncio.to_thread(sync_clients) == 2
            async with AsyncReader(connection=conn, topics=topics) as reader:
                kept = await reader.get_all_reported_checkpoints(run, 1, "validated", timeout_s=60)
            assert evaluator.results["VALIDATED"] == 1
            assert [c.metrics.get("acc") for c in kept if c.path.endswith("/c0")] == [0.5]
        finally:
            evaluator.stop()
            await asyncio.wait_for(evaluating, 30)
        await ray_callback_reports(conn, topics, tmp_path)
        await every_command_reads_the_environment(env, settings, run, root)


async def ray_callback_reports(conn: ConnectionSettings, topics: Topics, tmp_path: Path) -> None:
    """The callback travels pickled to Ray's controller with its `connection=` and reports through it."""
    callback = pickle.loads(pickle.dumps(CkptlogCallback("ray-secure", connection=conn, topic=topics.events)))
    root = tmp_path / "runs" / "ray-secure"
    root.mkdir()

    def controller() -> None:
        callback.after_controller_start(ray_controller("ray-secure", root))
        report = SimpleNamespace(metrics={"loss": 0.3}, checkpoint=None, validation=None)
        callback.after_report(report, [])
        callback.after_controller_finish()

    await asyncio.to_thread(controller)
    async with AsyncReader(connection=conn, topics=topics) as reader:
        result = await reader.wait_for("ray-secure", 1, "committed", timeout_s=60)
    assert result.view is not None and result.view.committed == 1


async def every_command_reads_the_environment(env: dict[str, str], settings: Any, run: str, root: Path) -> None:
    """On main `CKPTLOG_SECURITY_PROTOCOL=SASL_SSL ckptlog report` connected in plaintext."""
    topics = ["--state-topic", settings.state_topic, "--dlq-topic", settings.dlq_topic]
    code, out, err = await cli(
        env, "report", run, "-m", "loss=0.8", "--checkpoint", str(root / "c2"), "--topic", settings.input_topic,
        "--confirm", "--processor-group", settings.group_id, "--dlq-topic", settings.dlq_topic,
    )  # fmt: skip
    assert code == 0, err
    code, out, err = await cli(env, "watch", run, "--once", *topics)
    assert code == 0 and "c2" in out, err
    code, out, err = await cli(env, "inspect", run, "--json", *topics)
    assert code == 0 and json.loads(out)["runs"][run]["committed"] == 3, err
    code, out, err = await cli(env, "rejections", run, "--dlq-topic", settings.dlq_topic)
    assert code == 0, err
    secure = (
        "CKPTLOG_SECURITY_PROTOCOL",
        "CKPTLOG_SASL_PLAIN_USERNAME",
        "CKPTLOG_SASL_PLAIN_PASSWORD",
        "CKPTLOG_SSL_CAFILE",
    )
    plain = {k: v for k, v in env.items() if k not in secure}
    code, out, err = await cli(plain, "report", run, "-m", "loss=0.7", "--topic", settings.input_topic)
    assert code != 0 and "Traceback" not in err  # plaintext to the SASL_SSL listener: refused, not sent
    assert PASSWORD not in out + err
