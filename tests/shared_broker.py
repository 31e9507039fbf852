"""One Kafka broker for a parallel test run: the xdist controller starts it, every worker uses it.

`pytest -n N` (pytest-xdist) runs N worker processes; each would otherwise start its own broker (a
JVM, ~1 GiB and seconds of start-up per worker). The controller's `pytest_configure` starts one
LocalBroker before the workers are spawned and hands its address down in $CKPTLOG_TEST_SHARED_BOOTSTRAP
(a variable of its own, not $KAFKA_BOOTSTRAP_SERVERS: the code under test reads that one, and tests
of "no broker configured" must not see the shared broker); `pytest_unconfigure` stops it. A serial
run (no `-n`) keeps the session fixture's broker (tests/integration/conftest.py).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

SHARED_BOOTSTRAP_ENV = "CKPTLOG_TEST_SHARED_BOOTSTRAP"
_STASH = pytest.StashKey[object]()


def _is_parallel_controller(config: pytest.Config) -> bool:
    workers = getattr(config.option, "numprocesses", None)
    return bool(workers) and not hasattr(config, "workerinput") and not os.environ.get(SHARED_BOOTSTRAP_ENV)


def start(config: pytest.Config) -> None:
    """In the controller of `pytest -n N` without a configured broker: start the shared one."""
    if not _is_parallel_controller(config) or os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip():
        return
    from ckptlog.broker import LocalBroker
    from ckptlog.broker.config import free_port

    workdir = Path(tempfile.mkdtemp(prefix="ckptlog-shared-broker-"))
    broker = LocalBroker(workdir, free_port(), log=lambda msg: print(f"[kafka] {msg}"))
    os.environ[SHARED_BOOTSTRAP_ENV] = broker.start()
    config.stash[_STASH] = broker


def stop(config: pytest.Config) -> None:
    broker = config.stash.get(_STASH, None)
    if broker is not None:
        from ckptlog.broker import LocalBroker

        assert isinstance(broker, LocalBroker)
        broker.stop()
        os.environ.pop(SHARED_BOOTSTRAP_ENV, None)
