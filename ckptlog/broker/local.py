"""Start, stop and query a detached single-node Kafka (KRaft) broker in a directory.

The directory holds everything: server.properties, log4j2.properties, data/,
broker.log and broker.json (pid + bootstrap). It lets tests and the CLI share a
real broker without Docker. Where Kafka is gets decided by `find_bootstrap` (clients: the
configured address or an already running default broker, never a new one; in
ckptlog.kafka.discovery, which reads what is written here) and `ensure_bootstrap` (here:
`ckptlog run` / `demo`, which may start the default broker, and says so).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import TracebackType

from ckptlog.broker.config import (
    DEFAULT_PORT,
    LOG4J2_PROPERTIES,
    BrokerConfig,
    BrokerSecurity,
    free_port,
    new_cluster_id,
    port_is_free,
    render_server_properties,
)
from ckptlog.broker.errors import BrokerStartError, PortInUseError
from ckptlog.broker.jars import KAFKA_VERSION, JarCache, Log, fetch_jars, quiet, require_java
from ckptlog.broker.process import terminate
from ckptlog.kafka import probe
from ckptlog.kafka.discovery import (
    PROPS_FILE,
    STATE_FILE,
    BrokerState,
    alive,
    configured_bootstrap,
    default_dir,
    live_pid,
    read_state,
)
from ckptlog.processor.invocation import ckptlog_command

# sh starts the JVM in the background and exits, so the broker is nobody's child
# (no zombie, no ResourceWarning) yet stays in the new session's process group.
_LAUNCH = 'log="$1"; shift; "$@" >>"$log" 2>&1 </dev/null & echo $!'


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class BrokerStatus:
    """What `ckptlog broker status` reports."""

    running: bool
    answering: bool
    bootstrap: str | None
    pid: int | None
    log_file: Path


class LocalBroker:
    """A combined broker+controller on 127.0.0.1 whose whole life lives in `dir`."""

    def __init__(
        self,
        dir: Path | str | None = None,
        port: int | None = None,
        *,
        kafka_version: str = KAFKA_VERSION,
        cache_root: Path | None = None,
        path: str | None = None,
        heap: str = "1g",
        start_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        log: Log = quiet,
        security: BrokerSecurity | None = None,
    ) -> None:
        self.dir = Path(dir if dir is not None else default_dir()).expanduser().resolve()
        self.security = security  # an extra SASL_SSL listener (tests of secure clients)
        self.port = port
        self.kafka_version = kafka_version
        self.cache_root = cache_root
        self.path = path
        self.heap = heap
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.log = log

    @property
    def state_file(self) -> Path:
        return self.dir / STATE_FILE

    @property
    def log_file(self) -> Path:
        return self.dir / "broker.log"

    @property
    def props_file(self) -> Path:
        return self.dir / PROPS_FILE

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    def __enter__(self) -> LocalBroker:
        self.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # -- state ---------------------------------------------------------------

    def read_state(self) -> BrokerState | None:
        """broker.json, or None when absent or unreadable."""
        return read_state(self.state_file)

    def _write_state(self, state: BrokerState) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=1) + "\n")
        os.replace(tmp, self.state_file)

    def _live_pid(self, state: BrokerState | None) -> int | None:
        """The pid from broker.json if it is alive and really this dir's broker."""
        return live_pid(state, self.props_file)

    def status(self) -> BrokerStatus:
        """Whether the broker process lives and whether it answers a Metadata request."""
        state = self.read_state()
        pid = self._live_pid(state)
        bootstrap = state.bootstrap if state else None
        answering = pid is not None and bootstrap is not None and probe.answers(bootstrap)
        return BrokerStatus(pid is not None, answering, bootstrap, pid, self.log_file)

    def bootstrap(self) -> str | None:
        """The address of the running broker, or None."""
        state = self.read_state()
        if state is None or self._live_pid(state) is None:
            return None
        return state.bootstrap

    def log_tail(self, lines: int = 30) -> str:
        """The end of broker.log, to put into error messages."""
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return "(no broker.log)"
        return "\n".join(text.splitlines()[-lines:])

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """One start/stop at a time per directory, across processes."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / ".lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # -- start ---------------------------------------------------------------

    def start(self) -> str:
        """Start the broker (or reuse the running one) and return its bootstrap address."""
        with self._locked():
            state = self.read_state()
            if state is not None and self._live_pid(state) is not None:
                self.log(f"broker in {self.dir} is already running (pid {state.pid})")
                if self.port is not None and self.port != state.port:
                    self.log(f"ignoring --port {self.port}: stop it first to change the port")
                self._wait_ready(state)
                return state.bootstrap
            java = require_java(self.path)
            cache = fetch_jars(self.kafka_version, self.cache_root, self.path, self.log)
            cfg = self._choose_config(state)
            self._write_config(cfg)
            cluster_id = self._format(java, cache, cfg)
            self.log(f"starting Kafka {self.kafka_version} on {cfg.bootstrap} (log: {self.log_file})")
            pid = self._spawn(java, cache)
            state = BrokerState(
                pid, cfg.bootstrap, cfg.port, cfg.controller_port,
                self.kafka_version, cluster_id, str(self.log_file),
            )  # fmt: skip
            self._write_state(state)
            self._wait_ready(state)
            return state.bootstrap

    def _choose_config(self, previous: BrokerState | None) -> BrokerConfig:
        """Explicit port, else last run's port, else 9092, else any free port."""
        if self.port is not None:
            if not port_is_free(self.port):
                raise PortInUseError(
                    f"port {self.port} on 127.0.0.1 is already in use; pass another --port "
                    f"or stop the process listening there"
                )
            port = self.port
        else:
            wanted = previous.port if previous is not None else DEFAULT_PORT
            port = wanted if port_is_free(wanted) else free_port()
            if port != wanted:
                self.log(f"port {wanted} is busy; using free port {port} instead")
        ctrl = previous.controller_port if previous is not None else 0
        if ctrl in (0, port) or not port_is_free(ctrl):
            ctrl = free_port(exclude=(port,))
        return BrokerConfig(port=port, controller_port=ctrl, data_dir=self.data_dir, security=self.security)

    def _write_config(self, cfg: BrokerConfig) -> None:
        self.props_file.write_text(render_server_properties(cfg))
        (self.dir / "log4j2.properties").write_text(LOG4J2_PROPERTIES)

    def _jvm(self, java: str, cache: JarCache) -> list[str]:
        log4j = self.dir / "log4j2.properties"
        return [
            java, f"-Xmx{self.heap}", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}", "-cp", cache.classpath,
        ]  # fmt: skip

    def _format(self, java: str, cache: JarCache, cfg: BrokerConfig) -> str:
        """Format KRaft storage once per directory; return the cluster id on disk."""
        meta = cfg.data_dir / "meta.properties"
        if meta.is_file():
            for line in meta.read_text().splitlines():
                if line.startswith("cluster.id="):
                    return line.partition("=")[2].strip()
        cluster_id = new_cluster_id()
        self.log(f"formatting KRaft storage in {cfg.data_dir}")
        cmd = [
            *self._jvm(java, cache), "kafka.tools.StorageTool", "format", "--standalone",
            "-t", cluster_id, "-c", str(self.props_file),
        ]  # fmt: skip
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=120, check=False,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BrokerStartError(f"formatting {cfg.data_dir} failed: {exc}") from exc
        if done.returncode != 0:
            raise BrokerStartError(
                f"formatting {cfg.data_dir} failed (exit {done.returncode}); delete that "
                f"directory to start afresh.\n{(done.stdout + done.stderr)[-2000:]}"
            )
        return cluster_id

    def _spawn(self, java: str, cache: JarCache) -> int:
        """Launch kafka.Kafka detached in its own session; return the JVM's pid."""
        cmd = [*self._jvm(java, cache), "kafka.Kafka", str(self.props_file)]
        launcher = subprocess.run(
            ["/bin/sh", "-c", _LAUNCH, "ckptlog-broker", str(self.log_file), *cmd],
            capture_output=True, text=True, timeout=30, check=False,
            stdin=subprocess.DEVNULL, cwd=self.dir, start_new_session=True,
        )  # fmt: skip
        try:
            return int(launcher.stdout.strip())
        except ValueError:
            raise BrokerStartError(
                f"could not launch java ({launcher.stderr.strip()}); check `{java} -version`"
            ) from None

    def _wait_ready(self, state: BrokerState) -> None:
        """Poll with Metadata requests until the broker answers, it dies, or time runs out."""
        deadline = time.monotonic() + self.start_timeout
        while True:
            if state.pid is None or not alive(state.pid):
                self._write_state(replace(state, pid=None))
                raise BrokerStartError(f"the broker exited during startup; see {self.log_file}:\n{self.log_tail()}")
            if probe.answers(state.bootstrap):
                return
            if time.monotonic() > deadline:
                terminate(state.pid, self.stop_timeout, self.log)
                self._write_state(replace(state, pid=None))
                raise BrokerStartError(
                    f"the broker did not answer on {state.bootstrap} within "
                    f"{self.start_timeout:.0f}s and was stopped; see {self.log_file}:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.2)

    # -- stop ----------------------------------------------------------------

    def stop(self) -> bool:
        """Stop the broker (SIGTERM, then SIGKILL); False if it was not running."""
        with self._locked():
            state = self.read_state()
            pid = self._live_pid(state)
            if state is None or pid is None:
                if state is not None and state.pid is not None:
                    self._write_state(replace(state, pid=None))
                return False
            self.log(f"stopping broker pid {pid} on {state.bootstrap}")
            terminate(pid, self.stop_timeout, self.log)
            self._write_state(replace(state, pid=None))
            return True


def ensure_bootstrap(configured: str | None, *, log: Log = _stderr) -> str:
    """`configured_bootstrap`, else the default local broker, started if needed (only `ckptlog
    run` and `ckptlog demo` may do that); says on `log` which broker it used and how to stop it."""
    given = configured_bootstrap(configured)
    if given:
        return given
    broker = LocalBroker(default_dir(), log=log)
    status = broker.status()
    if status.running and status.answering and status.bootstrap:
        bootstrap = status.bootstrap
    else:
        bootstrap = broker.start()
    what = f"reusing the local Kafka broker already running on {bootstrap}"
    if not status.running:
        what = f"started a local Kafka broker on {bootstrap}"
    stop = f"{ckptlog_command()} broker stop"
    log(f"{what} (dir {broker.dir}); it keeps running after this command ends: stop it with `{stop}`")
    return bootstrap
