"""The reliability suite (issue 13): quick versions run in CI, long ones by documented commands
(docs/reliability.md). Tests needing a real broker use the integration fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import kafka_bootstrap, topic_factory  # noqa: F401 — fixtures shared

RELIABILITY_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test under tests/reliability as `reliability`."""
    for item in items:
        if RELIABILITY_DIR in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.reliability)
