"""Issue 21 #1: one connection settings model for the processor and every client, read from the same
places (CKPTLOG_*, a --config file, `connection=`); a setting a connection cannot honour is an
error, never a plaintext fallback. No broker needed: every case fails or resolves before a socket."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ckptlog import AsyncEvaluator, AsyncReader, AsyncReporter, ConnectionSettings, Reader, Reporter
from ckptlog.cli.main import _register, app
from ckptlog.client.connect import connect_now
from ckptlog.errors import ConfigError
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.processor.service.settings import ServiceSettings, load_settings

_register()
ADDRESS = "127.0.0.1:1"  # nothing listens: a test that reached a socket would fail, not hang
SECURE = {
    "CKPTLOG_SECURITY_PROTOCOL": "SASL_SSL",
    "CKPTLOG_SASL_MECHANISM": "SCRAM-SHA-512",
    "CKPTLOG_SASL_PLAIN_USERNAME": "trainer",
    "CKPTLOG_SASL_PLAIN_PASSWORD": "pw-secret",
}


def set_env(monkeypatch: pytest.MonkeyPatch, values: dict[str, str]) -> None:
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def test_the_processor_settings_are_the_connection_settings() -> None:
    """One model: the processor's connection fields are the clients' (not a copy that can drift)."""
    assert issubclass(ServiceSettings, ConnectionSettings)
    for name, info in ConnectionSettings.model_fields.items():
        assert ServiceSettings.model_fields[name].description == info.description


def test_a_client_without_connection_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """On main a client took bootstrap servers only: SASL_SSL in the environment went plaintext."""
    set_env(monkeypatch, SECURE)
    conn = connect_now(ADDRESS, "ckptlog-reporter")
    assert (conn.security_protocol, conn.sasl_mechanism, conn.sasl_plain_username) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "trainer",
    )
    assert conn.sasl_plain_password == "pw-secret" and "pw-secret" not in repr(conn)
    kwargs = conn.client_kwargs()
    assert kwargs["security_protocol"] == "SASL_SSL" and "ssl_context" in kwargs


def test_a_connection_argument_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ConnectionSettings(...)` is a settings model as run's: arguments win, CKPTLOG_* fill the rest."""
    set_env(monkeypatch, SECURE)
    given = ConnectionSettings(bootstrap_servers=ADDRESS, security_protocol="SASL_PLAINTEXT")
    conn = connect_now(None, "c", given)
    assert (conn.bootstrap_servers, conn.security_protocol, conn.sasl_plain_username) == (
        ADDRESS,
        "SASL_PLAINTEXT",
        "trainer",
    )
    assert "ssl_context" not in conn.client_kwargs()


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"CKPTLOG_SECURITY_PROTOCOL": "SASL_SSL"}, "CKPTLOG_SASL_PLAIN_USERNAME"),
        ({"CKPTLOG_SASL_PLAIN_USERNAME": "u", "CKPTLOG_SASL_PLAIN_PASSWORD": "p"}, "would be ignored"),
        ({"CKPTLOG_SSL_CAFILE": "/etc/ca.pem"}, "would be plaintext"),
        ({"CKPTLOG_SECURITY_PROTOCOL": "TLS"}, "not one of PLAINTEXT, SSL"),
        ({**SECURE, "CKPTLOG_SASL_MECHANISM": "GSSAPI"}, "not supported"),
        ({"CKPTLOG_SECURITY_PROTOCOL": "SSL", "CKPTLOG_SSL_CERTFILE": "/c.pem"}, "both ssl_certfile and ssl_keyfile"),
    ],
)
def test_a_setting_no_connection_can_honour_is_an_error_for_every_client(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], says: str
) -> None:
    set_env(monkeypatch, env)
    for make in (
        lambda: Reporter("r", bootstrap_servers=ADDRESS),
        lambda: Reader(bootstrap_servers=ADDRESS),
        lambda: connect_now(ADDRESS, "ckptlog-evaluator"),
    ):
        with pytest.raises(ConfigError, match=says):
            make()
    with pytest.raises(ConfigError, match=says):  # the processor refuses the same settings the same way
        load_settings(None, bootstrap_servers=ADDRESS)


async def test_the_async_clients_refuse_before_connecting(monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, {"CKPTLOG_SECURITY_PROTOCOL": "SASL_SSL"})
    with pytest.raises(ConfigError, match="needs a SASL user and password"):
        await AsyncReporter("r", bootstrap_servers=ADDRESS).start()
    with pytest.raises(ConfigError, match="needs a SASL user and password"):
        await AsyncReader(bootstrap_servers=ADDRESS).start()
    with pytest.raises(ConfigError, match="needs a SASL user and password"):
        await AsyncEvaluator(lambda path: {}, bootstrap_servers=ADDRESS).run()


def test_the_config_file_of_run_gives_a_client_its_connection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The processor's own file (with its other keys) serves the clients; the environment wins over it."""
    config = tmp_path / "ckptlog.toml"
    config.write_text(
        'bootstrap-servers = "kafka:9093"\nsecurity_protocol = "SSL"\nssl_cafile = "/etc/ca.pem"\n'
        'group_id = "ckptlog-prod"\nstorage_root = "s3://bucket/runs"\n'
    )
    settings = ConnectionSettings.load(config)
    assert (settings.bootstrap_servers, settings.security_protocol) == ("kafka:9093", "SSL")
    monkeypatch.setenv("CKPTLOG_SSL_CAFILE", "/other/ca.pem")
    assert ConnectionSettings.load(config).ssl_cafile == "/other/ca.pem"
    assert load_settings(config).ssl_cafile == "/other/ca.pem"  # the same order as `ckptlog run`


def test_a_delivery_timeout_reaches_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CKPTLOG_DELIVERY_TIMEOUT_S", "2.5")
    assert connect_now(ADDRESS, "c").delivery_timeout_s == 2.5
    monkeypatch.setenv("CKPTLOG_DELIVERY_TIMEOUT_S", "0")
    with pytest.raises(ConfigError, match="delivery_timeout_s"):
        connect_now(ADDRESS, "c")


def test_settings_travel_to_a_ray_controller_without_showing_the_password() -> None:
    settings = ConnectionSettings(
        security_protocol="SASL_SSL", sasl_plain_username="u", sasl_plain_password="pw-secret"
    )
    back = pickle.loads(pickle.dumps(settings))
    assert back == settings and back.password() == "pw-secret"
    assert "pw-secret" not in repr(settings) and "pw-secret" not in str(settings)


def test_bootstrap_servers_and_a_connection_that_disagree_are_an_error() -> None:
    with pytest.raises(ConfigError, match="disagree"):
        connect_now("other:9092", "c", KafkaConnection(ADDRESS))


@pytest.mark.parametrize(
    "args",
    [
        ["report", "r1", "-m", "loss=1"],
        ["start-run", "r1", "/tmp/runs/r1"],
        ["worker-group-restart", "r1", "--num-workers", "2", "--generation", "0"],
        ["evaluate", "--fn", "os:getcwd"],
        ["watch", "r1", "--once"],
        ["inspect"],
        ["rejections"],
    ],
)
def test_every_client_command_refuses_sasl_without_a_user(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """On main `CKPTLOG_SECURITY_PROTOCOL=SASL_SSL ckptlog report` sent plaintext and exited 0, and
    `inspect` died with a raw ValueError."""
    monkeypatch.setenv("CKPTLOG_SECURITY_PROTOCOL", "SASL_SSL")
    result = CliRunner().invoke(app, [*args, "--bootstrap-servers", ADDRESS])
    assert result.exit_code == 2, result.output
    assert "needs a SASL user and password" in result.output
    assert "Traceback" not in result.output


async def test_metrics_that_are_not_a_mapping_are_ckptlogs_invalid_event() -> None:
    """Issue 21 #9: `report([1, 2, 3])` raised a bare TypeError."""
    from ckptlog import InvalidEvent

    with pytest.raises(InvalidEvent, match="must be a mapping"):
        await AsyncReporter("r", connection=KafkaConnection(ADDRESS)).report([1, 2, 3])  # type: ignore[arg-type]
