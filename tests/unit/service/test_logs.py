"""Structured logs: key=value text, JSON with the pairs lifted into fields."""

from __future__ import annotations

import json
import logging

from processor.service.logs import JsonFormatter, KeyValueFormatter


def record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("processor.x", logging.WARNING, __file__, 1, message, args, None)


def test_json_lifts_key_value_pairs() -> None:
    line = JsonFormatter().format(record("event=rejected partition=%s offset=%d message=%r", "in[0]", 5, "bad x"))
    body = json.loads(line)
    assert (body["event"], body["partition"], body["offset"], body["message"]) == ("rejected", "in[0]", "5", "bad x")
    assert body["msg"].startswith("event=rejected")
    assert body["level"] == "WARNING" and body["logger"] == "processor.x"


def test_text_is_one_key_value_line() -> None:
    line = KeyValueFormatter().format(record("event=caught_up partition=%s", "in[1]"))
    assert line.startswith("ts=") and "level=WARNING logger=processor.x event=caught_up partition=in[1]" in line
