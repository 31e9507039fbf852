"""Where Kafka is: `find_bootstrap` finds a running default broker and never starts one;
`ensure_bootstrap` says whether it started or reused it. No JVM: the "broker" is a sleeping
process named after the broker's server.properties plus a socket answering Metadata."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ckptlog.broker import LocalBroker, ensure_bootstrap
from ckptlog.client.connect import require_bootstrap
from ckptlog.kafka import probe
from ckptlog.kafka.discovery import ENV_BOOTSTRAP, find_bootstrap, running_bootstrap
from ckptlog.processor.invocation import ckptlog_command

KEEPS_RUNNING = f"it keeps running after this command ends: stop it with `{ckptlog_command()} broker stop`"


def _answer_metadata(conn: socket.socket, port: int) -> None:
    """Reply to one Metadata request with a single live broker (what probe.answers wants)."""
    with conn:
        (size,) = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))
        (correlation_id,) = struct.unpack_from(">i", conn.recv(size, socket.MSG_WAITALL), 4)
        host = b"127.0.0.1"
        body = struct.pack(">iiiih", correlation_id, 0, 1, 1, len(host)) + host + struct.pack(">ih", port, -1)
        conn.sendall(struct.pack(">i", len(body)) + body)


@contextmanager
def metadata_server() -> Iterator[int]:
    """A listening socket that answers Metadata requests; yields its port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)
    port, done = server.getsockname()[1], threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.settimeout(5)
            threading.Thread(target=_answer_metadata, args=(conn, port), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        done.set()
        thread.join(5)
        server.close()


@contextmanager
def broker_process(broker: LocalBroker) -> Iterator[int]:
    """A live process whose command line names the broker's server.properties; yields its pid."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(broker.props_file)])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def write_state(broker: LocalBroker, pid: int | None, port: int) -> None:
    broker.dir.mkdir(parents=True)
    state = {
        "pid": pid, "bootstrap": f"127.0.0.1:{port}", "port": port, "controller_port": port + 1,
        "kafka_version": "4.0.0", "cluster_id": "x", "log_file": str(broker.log_file),
    }  # fmt: skip
    broker.state_file.write_text(json.dumps(state))


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty $CKPTLOG_HOME, no bootstrap in the environment, and no broker may be started."""
    monkeypatch.setenv("CKPTLOG_HOME", str(tmp_path))
    for name in ENV_BOOTSTRAP:
        monkeypatch.delenv(name, raising=False)

    def no_start(self: LocalBroker) -> str:
        raise AssertionError(f"started a broker in {self.dir}")

    monkeypatch.setattr(LocalBroker, "start", no_start)
    return tmp_path


def test_a_running_default_broker_is_found_and_reused(home: Path) -> None:
    broker = LocalBroker(home / "broker")
    with metadata_server() as port, broker_process(broker) as pid:
        write_state(broker, pid, port)
        address = f"127.0.0.1:{port}"
        assert probe.answers(address, timeout=30)  # a loaded machine: the first answer may take > 2 s
        assert running_bootstrap() == find_bootstrap(None) == require_bootstrap(None) == address
        assert find_bootstrap("given:9") == "given:9"
        said: list[str] = []
        assert ensure_bootstrap(None, log=said.append) == address
    assert said == [f"reusing the local Kafka broker already running on {address} (dir {broker.dir}); {KEEPS_RUNNING}"]


def test_no_broker_is_found_when_none_runs_or_answers(home: Path) -> None:
    assert find_bootstrap(None) is None
    assert not (home / "broker").exists()  # looking creates nothing
    broker = LocalBroker(home / "broker")
    with metadata_server() as port:
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        write_state(broker, dead.pid, port)
        assert find_bootstrap(None) is None  # state file, but its pid is gone
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        broker.state_file.unlink()
        broker.dir.rmdir()
        with broker_process(broker) as pid:
            write_state(broker, pid, closed.getsockname()[1])
            started = time.monotonic()
            assert find_bootstrap(None) is None  # alive but not answering
            assert time.monotonic() - started < 5


def test_ensure_bootstrap_says_it_started_the_broker_and_how_to_stop_it(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(LocalBroker, "start", lambda self: "127.0.0.1:7")
    said: list[str] = []
    assert ensure_bootstrap(None, log=said.append) == "127.0.0.1:7"
    assert said == [f"started a local Kafka broker on 127.0.0.1:7 (dir {(home / 'broker').resolve()}); {KEEPS_RUNNING}"]
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "a:1")
    assert ensure_bootstrap(None, log=said.append) == "a:1"
    assert len(said) == 1  # a configured broker is nobody's business
