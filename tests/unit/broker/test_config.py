"""Pure parts of the local broker launcher: no network, no JVM, no real Maven."""

from __future__ import annotations

import base64
import json
import re
import socket
import struct
import subprocess
from pathlib import Path

import pytest

from ckptlog.broker import (
    INSTALL_HINT,
    BrokerConfig,
    JarCache,
    JarFetchError,
    LocalBroker,
    PortInUseError,
    ToolMissingError,
    cache_root,
    ensure_bootstrap,
    fetch_jars,
    render_server_properties,
)
from ckptlog.broker import local as local_mod
from ckptlog.broker.config import new_cluster_id, port_is_free
from ckptlog.broker.jars import render_pom, require_java
from ckptlog.errors import BrokerError
from ckptlog.kafka.discovery import BrokerState, default_dir
from ckptlog.kafka.probe import _parse_brokers, answers

VERSION = "4.1.1"


def _script(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _fake_bin(tmp_path: Path, java_version: str = "17.0.15", mvn_body: str | None = None) -> str:
    """A PATH holding a fake `java` (and `mvn` if given) and nothing else."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    _script(bin_dir, "java", f"echo 'openjdk version \"{java_version}\" 2025-04-15' >&2\n")
    if mvn_body is not None:
        _script(bin_dir, "mvn", mvn_body)
    return str(bin_dir)


# A fake mvn that records its argv and "downloads" two jars into -DoutputDirectory.
FAKE_MVN = f"""echo "$@" >> "$(dirname "$0")/mvn.calls"
for arg in "$@"; do case "$arg" in -DoutputDirectory=*) out="${{arg#*=}}";; esac; done
mkdir -p "$out" && touch "$out/kafka_2.13-{VERSION}.jar" "$out/kafka-clients-{VERSION}.jar"
"""


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_server_properties_are_single_node_kraft_on_loopback(tmp_path: Path) -> None:
    props = _props(render_server_properties(BrokerConfig(39555, 39556, tmp_path / "data")))

    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:39555,CONTROLLER://127.0.0.1:39556"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:39555"
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:39556"
    assert props["log.dirs"] == str(tmp_path / "data")
    for key in ("offsets.topic", "transaction.state.log", "share.coordinator.state.topic"):
        assert props[f"{key}.replication.factor"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"
    assert props["group.initial.rebalance.delay.ms"] == "0"


def test_cluster_id_is_kafka_shaped() -> None:
    for _ in range(50):
        cid = new_cluster_id()
        assert len(cid) == 22 and not cid.startswith("-")
        assert len(base64.urlsafe_b64decode(cid + "==")) == 16


def test_pom_pins_slf4j_2_so_log4j_binds() -> None:
    pom = render_pom("4.0.0")
    assert "<artifactId>kafka_2.13</artifactId><version>4.0.0</version>" in pom
    assert "<artifactId>slf4j-api</artifactId><version>2.0.17</version>" in pom


def test_missing_java_or_mvn_says_what_to_install(tmp_path: Path) -> None:
    empty = str(tmp_path)
    with pytest.raises(ToolMissingError, match=re.escape(INSTALL_HINT)):
        require_java(empty)
    with pytest.raises(ToolMissingError, match="`mvn` was not found"):
        fetch_jars(VERSION, tmp_path / "cache", path=_fake_bin(tmp_path))
    with pytest.raises(BrokerError, match=re.escape(INSTALL_HINT)):
        LocalBroker(tmp_path / "b", path=empty).start()
    assert not (tmp_path / "b" / "broker.json").exists()


@pytest.mark.parametrize(("version", "ok"), [("17.0.15", True), ("21", True), ("11.0.2", False), ("1.8.0_392", False)])
def test_java_version_check(tmp_path: Path, version: str, ok: bool) -> None:
    path = _fake_bin(tmp_path, java_version=version)
    if ok:
        assert require_java(path).endswith("java")
    else:
        with pytest.raises(ToolMissingError, match="needs Java 17"):
            require_java(path)


def test_fetch_runs_maven_once_then_only_reads_the_marker(tmp_path: Path) -> None:
    path = _fake_bin(tmp_path, mvn_body=FAKE_MVN)
    cache = fetch_jars(VERSION, tmp_path / "cache", path=path)

    assert cache.libs == tmp_path / "cache" / f"kafka-{VERSION}" / "libs"
    assert cache.is_complete()
    assert json.loads(cache.marker.read_text())["jars"] == [f"kafka-clients-{VERSION}.jar", f"kafka_2.13-{VERSION}.jar"]
    assert "dependency:copy-dependencies" in (Path(path) / "mvn.calls").read_text()

    # Second fetch: no mvn on PATH at all, and it must not be needed.
    again = fetch_jars(VERSION, tmp_path / "cache", path=str(tmp_path / "nothing"))
    assert again == cache
    assert len((Path(path) / "mvn.calls").read_text().splitlines()) == 1


def test_marker_is_invalidated_by_wrong_version_or_missing_jar(tmp_path: Path) -> None:
    cache = JarCache(tmp_path, VERSION)
    assert not cache.is_complete()  # nothing there
    cache.libs.mkdir(parents=True)
    (cache.libs / "a.jar").touch()
    cache.write_marker()
    assert cache.is_complete()
    assert not JarCache(tmp_path, "9.9.9").is_complete()
    cache.marker.write_text(json.dumps({"kafka_version": "4.0.0", "jars": ["a.jar"]}))
    assert not cache.is_complete()
    cache.write_marker()
    (cache.libs / "a.jar").unlink()
    assert not cache.is_complete()


def test_failed_maven_run_reports_its_output_and_leaves_no_marker(tmp_path: Path) -> None:
    path = _fake_bin(tmp_path, mvn_body='echo "[ERROR] Could not resolve kafka_2.13:9.9.9"; exit 1\n')
    with pytest.raises(JarFetchError, match="Could not resolve kafka_2.13:9.9.9"):
        fetch_jars("9.9.9", tmp_path / "cache", path=path)
    assert not JarCache(tmp_path / "cache", "9.9.9").marker.exists()


def test_default_locations_follow_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CKPTLOG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CKPTLOG_CACHE", str(tmp_path / "cache"))
    assert default_dir() == tmp_path / "home" / "broker"
    assert cache_root() == tmp_path / "cache"


def test_status_and_stop_with_stale_pid_report_not_running(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    broker = LocalBroker(tmp_path)
    assert not broker.status().running  # no broker.json at all
    state = BrokerState(dead.pid, "127.0.0.1:1", 1, 2, VERSION, "x", str(broker.log_file))
    broker.state_file.write_text(json.dumps(state.__dict__))

    status = broker.status()
    assert (status.running, status.answering, status.bootstrap) == (False, False, "127.0.0.1:1")
    assert broker.stop() is False
    assert broker.read_state() == BrokerState(None, "127.0.0.1:1", 1, 2, VERSION, "x", str(broker.log_file))


def test_ports_explicit_busy_fails_default_busy_falls_back(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert not port_is_free(taken)
        with pytest.raises(PortInUseError, match="pass another --port"):
            LocalBroker(tmp_path, taken)._choose_config(None)

        said: list[str] = []
        previous = BrokerState(None, f"127.0.0.1:{taken}", taken, taken, VERSION, "x", "")
        cfg = LocalBroker(tmp_path, log=said.append)._choose_config(previous)
    assert cfg.port != taken and cfg.controller_port not in (taken, cfg.port)
    assert said == [f"port {taken} is busy; using free port {cfg.port} instead"]


def test_ensure_bootstrap_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    started: list[Path] = []

    def fake_start(self: LocalBroker) -> str:
        started.append(self.dir)
        return "127.0.0.1:7"

    monkeypatch.setattr(local_mod.LocalBroker, "start", fake_start)
    monkeypatch.setenv("CKPTLOG_HOME", str(tmp_path))
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("CKPTLOG_BOOTSTRAP_SERVERS", raising=False)

    assert ensure_bootstrap(None) == "127.0.0.1:7"
    assert started == [tmp_path.resolve() / "broker"]
    monkeypatch.setenv("CKPTLOG_BOOTSTRAP_SERVERS", "b:2")
    assert ensure_bootstrap(None) == "b:2"
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "a:1")
    assert ensure_bootstrap(None) == "a:1"
    assert ensure_bootstrap("given:9") == "given:9"
    assert len(started) == 1


def test_probe_parses_metadata_brokers_and_rejects_non_kafka() -> None:
    host = b"127.0.0.1"
    body = struct.pack(">iii", 7, 0, 1) + struct.pack(">ih", 1, len(host)) + host
    body += struct.pack(">ih", 39555, -1)
    assert _parse_brokers(body, 7) == [(1, "127.0.0.1", 39555)]
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert answers(f"127.0.0.1:{port}", timeout=0.5) is False
