"""Local storage emulators for the storage contract suite: Azurite (Azure Blob, from npm) and
fake-gcs-server (Google Cloud Storage, built from the Go module proxy). S3 is moto, in Python.

Each is installed once, pinned, into `${CKPTLOG_CACHE:-~/.cache/ckptlog}` (`make emulators`, which
`make test` and so .ci/run call, or the first session fixture that needs it), then started per test
session on a free 127.0.0.1 port by the fixtures in tests/conftest.py.

    python -m tests.emulators      # install both (what `make emulators` runs)
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

AZURITE_VERSION = "3.37.0"
FAKE_GCS_VERSION = "v1.56.1"
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""Azurite's well-known development account and key (public, in Azurite's documentation)."""

_LISTENING = re.compile(r"listens on (http://127\.0\.0\.1:\d+)")


def cache_dir() -> Path:
    return Path(os.environ.get("CKPTLOG_CACHE") or "~/.cache/ckptlog").expanduser()


class Missing(Exception):
    """A toolchain the emulator needs is not installed (the message says which, and how to get it)."""


def azurite_bin() -> Path:
    """`azurite-blob`, installed from npm into the cache on first use."""
    prefix = cache_dir() / f"azurite-{AZURITE_VERSION}"
    binary = prefix / "node_modules" / ".bin" / "azurite-blob"
    if binary.exists():
        return binary
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        tools = " and ".join(missing)
        raise Missing(f"{tools} not installed: Azurite (Azure Blob) runs on Node.js (apt-get install nodejs npm)")
    prefix.mkdir(parents=True, exist_ok=True)
    argv = ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error"]
    subprocess.run([*argv, f"azurite@{AZURITE_VERSION}"], check=True, timeout=600)
    return binary


def fake_gcs_bin() -> Path:
    """`fake-gcs-server`, built with `go install` from the Go module proxy into the cache on first use."""
    gobin = cache_dir() / f"fake-gcs-server-{FAKE_GCS_VERSION}"
    binary = gobin / "fake-gcs-server"
    if binary.exists():
        return binary
    if shutil.which("go") is None:
        raise Missing("go not installed: fake-gcs-server (Google Cloud Storage) is built with `go install`")
    env = dict(os.environ, GOBIN=str(gobin), GOTOOLCHAIN="local", CGO_ENABLED="0")
    module = f"github.com/fsouza/fake-gcs-server@{FAKE_GCS_VERSION}"
    subprocess.run(["go", "install", module], check=True, timeout=900, env=env)
    return binary


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=1)  # Azurite waits for clients to close their keep-alive connections: not for long
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@contextmanager
def azurite(location: Path, timeout: float = 60.0) -> Iterator[str]:
    """Azurite's blob service on a free port, data in `location`; yields its blob endpoint URL."""
    log = location / "azurite.log"
    argv = [str(azurite_bin()), "--blobHost", "127.0.0.1", "--blobPort", "0", "--location", str(location)]
    argv += ["--skipApiVersionCheck", "--loose", "--silent"]
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while not (found := _LISTENING.search(log.read_text(errors="replace"))):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Azurite did not start (exit {process.poll()}): {log.read_text(errors='replace')}")
            time.sleep(0.1)
        yield f"{found.group(1)}/{AZURITE_ACCOUNT}"
    finally:
        _stop(process)


@contextmanager
def fake_gcs(location: Path, timeout: float = 60.0) -> Iterator[str]:
    """fake-gcs-server over plain HTTP on a free port, objects in memory; yields its endpoint URL."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [str(fake_gcs_bin()), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-backend", "memory"]
    argv += ["-public-host", f"127.0.0.1:{port}", "-external-url", url, "-log-level", "error"]
    argv += ["-filesystem-root", str(location / "objects")]  # unused in memory; names the run's dir for cleanup
    log = location / "fake-gcs-server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/storage/v1/b", timeout=2):
                    break
            except (urllib.error.URLError, OSError) as exc:
                if process.poll() is not None or time.monotonic() > deadline:
                    why = f"exit {process.poll()}: {log.read_text(errors='replace')}"
                    raise RuntimeError(f"fake-gcs-server did not start ({why})") from exc
                time.sleep(0.1)
        yield url
    finally:
        _stop(process)


def main() -> int:
    """Install every emulator whose toolchain is here; say which could not be."""
    failed = 0
    for name, install in (("azurite", azurite_bin), ("fake-gcs-server", fake_gcs_bin)):
        start = time.monotonic()
        try:
            print(f"{name}: {install()} ({time.monotonic() - start:.0f} s)")
        except Missing as exc:
            print(f"{name}: not installed: {exc}", file=sys.stderr)
            failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main())
