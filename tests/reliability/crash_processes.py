"""The crash matrix's moving parts: `ckptlog run` / `ckptlog replay` subprocesses, the feeder, and
(for the command-line version) a broker and an S3 server of its own.

Each subprocess logs to its own file (`logs/NNN-label.log`), so a failure names the instance
to read. `CKPTLOG_CRASH_AT` is set only for the instance aimed at a point.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ckptlog.broker import LocalBroker
from ckptlog.broker.config import free_port
from ckptlog.kafka import IdempotentProducer, KafkaConnection
from ckptlog.processor.failpoints import ENV
from ckptlog.processor.service.harness import event_record
from tests.reliability.crash_workload import Workload
from tests.storage_contract import S3Endpoint

KILLED = -signal.SIGKILL


class Instance:
    """One subprocess: `ckptlog run` or `ckptlog replay`."""

    def __init__(self, argv: list[str], log: Path, crash: str | None) -> None:
        env = {k: v for k, v in os.environ.items() if k != ENV}
        if crash is not None:
            env[ENV] = crash
        self.log, self.crash = log, crash
        with log.open("ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "ckptlog.cli", *argv], stdout=out, stderr=out, env=env)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    async def caught_up(self, partitions: int, timeout_s: float) -> bool:
        """Wait until every partition logged event=caught_up (False: it exited or timed out)."""
        deadline = time.monotonic() + timeout_s
        while self.text().count("event=caught_up") < partitions:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    async def exit_code(self, timeout_s: float) -> int | None:
        """The exit code (-9: SIGKILL), or None when still running after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while self.proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return self.proc.poll()

    async def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM (graceful); the exit code, or None after killing it for not stopping."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = await self.exit_code(timeout_s)
        if code is None:
            self.kill()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Feeder:
    """Produces the workload's chunks at a steady rate until stopped; pausable (for a settled check)."""

    def __init__(self, conn: KafkaConnection, topic: str, workload: Workload, rate: float, chunk: int = 12) -> None:
        self.conn, self.topic, self.workload = conn, topic, workload
        self.interval_s, self.chunk = chunk / rate, chunk
        self.produced = 0
        self._open = asyncio.Event()
        self._open.set()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        producer = IdempotentProducer(self.conn)
        await producer.start()
        try:
            while True:
                await self._open.wait()
                async with self._lock:
                    lines = await asyncio.to_thread(self.workload.chunk, self.chunk)  # writes checkpoint files
                    await producer.publish([event_record(self.topic, line) for line in lines])
                    self.produced += len(lines)
                await asyncio.sleep(self.interval_s)
        finally:
            await producer.stop()

    async def pause(self) -> None:
        """Return once no chunk is being produced and none will be until `resume`."""
        self._open.clear()
        async with self._lock:
            pass

    def resume(self) -> None:
        self._open.set()

    async def until(self, events: int) -> None:
        while self.produced < events:
            self.failed()
            await asyncio.sleep(0.1)

    def failed(self) -> None:
        """Raise the feeder's own error, if it stopped with one."""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            self._task.result()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


@contextmanager
def broker(workdir: Path) -> Iterator[str]:
    """$KAFKA_BOOTSTRAP_SERVERS, else a LocalBroker of its own under `workdir` (stopped at the end)."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if configured:
        yield configured
        return
    local = LocalBroker(workdir / "broker", free_port(), log=lambda m: print(f"[kafka] {m}", flush=True))
    try:
        yield local.start()
    finally:
        local.stop()


@contextmanager
def moto(enabled: bool) -> Iterator[S3Endpoint | None]:
    """moto's S3 server in this process (as the `s3_endpoint` fixture), when `enabled`."""
    if not enabled:
        yield None
        return
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url, creds = f"http://{host}:{port}", {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    client = boto3.client("s3", endpoint_url=url, region_name="us-east-1", **creds)

    def make_bucket() -> str:
        name = f"ckptlog-{uuid.uuid4().hex[:16]}"
        client.create_bucket(Bucket=name)
        return f"s3://{name}"

    options = {
        "endpoint_url": url,
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"region_name": "us-east-1"},
    }
    try:
        yield S3Endpoint(endpoint_url=url, storage_options=options, make_bucket=make_bucket)
    finally:
        server.stop()
