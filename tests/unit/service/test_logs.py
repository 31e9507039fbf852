"""Structured logs: console key=value lines, JSON objects with the pairs as typed fields, no secrets."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from ckptlog.processor.service import logs
from ckptlog.processor.service.logs import JsonFormatter, KeyValueFormatter, redact, register_secrets
from ckptlog.processor.service.settings import load_settings


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("processor.x", logging.WARNING, __file__, 1, message, args, None)
    made.__dict__.update(extra)
    return made


@pytest.fixture(autouse=True)
def no_registered_secrets() -> Iterator[None]:
    yield
    logs.clear_secrets()


def test_json_lifts_key_value_pairs_as_typed_fields() -> None:
    line = JsonFormatter().format(
        record("event=rejected at=%s@%d run=%r offset=%d message=%r", "in[0]", 5, "run 1", 5, "bad x")
    )
    body = json.loads(line)
    assert (body["event"], body["at"], body["run"], body["offset"]) == ("rejected", "in[0]@5", "run 1", 5)
    assert body["message"] == "bad x" and body["msg"].startswith("event=rejected")
    assert body["level"] == "WARNING" and body["logger"] == "processor.x" and body["ts"].endswith("Z")


def test_json_carries_extra_fields() -> None:
    body = json.loads(JsonFormatter().format(record("event=x", run="r1", at="t[0]@3")))
    assert body["run"] == "r1" and body["at"] == "t[0]@3"


def test_console_is_one_key_value_line() -> None:
    line = KeyValueFormatter().format(record("event=caught_up at=%s@%d", "in[1]", 7, run="a b"))
    assert line.startswith("ts=") and "level=WARNING logger=processor.x event=caught_up at=in[1]@7" in line
    assert line.endswith("run='a b'")


@pytest.mark.parametrize(
    "message",
    [
        "event=x url=s3://AKIAEXAMPLE:hunter2-secret@bucket/snaps",
        "event=x sasl_plain_password=hunter2-secret",
        "event=x options={'key': 'AKIAEXAMPLE', 'secret': 'hunter2-secret'}",
        'event=x options={"token": "hunter2-secret"}',
        "event=x error='login failed for hunter2-secret'",
    ],
)
def test_no_secret_reaches_a_line(message: str) -> None:
    register_secrets(["hunter2-secret", "AKIAEXAMPLE", "abc"])
    for formatter in (KeyValueFormatter(), JsonFormatter()):
        line = formatter.format(record(message))
        assert "hunter2" not in line and "AKIAEXAMPLE" not in line and "***" in line, line


def test_settings_name_their_secrets() -> None:
    settings = load_settings(
        None,
        security_protocol="SASL_PLAINTEXT",
        sasl_plain_username="ckptlog",
        sasl_plain_password="sasl-pw-1",
        snapshot_storage_options={"key": "ak-1", "secret": "sk-1", "endpoint_url": "http://minio:9000"},
        checkpoint_storage_options={"s3": {"client_kwargs": {"aws_session_token": "tok-1"}, "anon": False}},
    )
    assert sorted(settings.secrets()) == ["ak-1", "sasl-pw-1", "sk-1", "tok-1"]
    assert redact("http://user:pw@host/x") == "http://user:***@host/x"
