"""The gate to aiokafka's private attributes (ckptlog/kafka/fence.py)."""

from __future__ import annotations

import logging

import pytest

from ckptlog.kafka import fence
from ckptlog.kafka.connection import KafkaConnection
from ckptlog.kafka.settings import ConnectionSettings


def test_the_internals_are_used_only_on_the_version_they_were_written_for(caplog: pytest.LogCaptureFixture) -> None:
    assert fence.use_internals("auto", found=fence.WRITTEN_FOR)
    assert not fence.use_internals("off", found=fence.WRITTEN_FOR)
    with caplog.at_level(logging.WARNING, logger="ckptlog.kafka.fence"):
        assert not fence.use_internals("auto", found="0.99.1")
        assert not fence.use_internals("auto", found="0.99.1")  # said once per version
    (line,) = [r.getMessage() for r in caplog.records if "0.99.1" in r.getMessage()]
    assert "fall back to aiokafka's public API" in line and "slower" in line and "correct" in line
    assert f"aiokafka=={fence.WRITTEN_FOR}" in line and "CKPTLOG_AIOKAFKA_INTERNALS=off" in line


def test_the_setting_reaches_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CKPTLOG_AIOKAFKA_INTERNALS", "off")
    conn = ConnectionSettings.load().connect("h:1", "c")
    assert conn.aiokafka_internals == "off" and not conn.internals
    assert KafkaConnection("h:1").internals == (fence.installed() == fence.WRITTEN_FOR)
    monkeypatch.setenv("CKPTLOG_AIOKAFKA_INTERNALS", "sometimes")
    with pytest.raises(Exception, match="aiokafka_internals"):
        ConnectionSettings.load()
