"""Structured logs on the standard library's `logging`: `--log-format console` (one `key=value`
line per record, the default; `text` is its old name) or `json` (one JSON object per line).

Log calls in ckptlog write `event=name key=value ...` messages, quoting values that may hold
spaces with `%r`, so a console line reads well and every pair is also a field: the JSON
formatter lifts them (numbers as numbers, quoted values unquoted) next to `ts`, `level`,
`logger` and the whole line in `msg`, and adds any `extra=` fields. Field names are shared:
`event` what happened, `partition` a whole input partition (`topic[p]`), `at` one record or
offset (`topic[p]@offset`), `run` the run id, `path` a checkpoint path.

No secrets, ever: every line (message, fields, traceback) passes through `redact`
(ckptlog/processor/redaction.py: URL credentials, secret-looking `key=value`s, and every value registered
by `configure_logging(secrets=...)`, the short ones where they stand as a whole value). The CLI
writes every stderr line through it too (ckptlog/cli/errors.py).
"""

from __future__ import annotations

import ast
import json
import logging
import re
import sys
import time
from collections.abc import Iterable
from typing import Any

from ckptlog.processor.redaction import MASK, clear_secrets, redact, register_secrets

__all__ = [
    "MASK",
    "JsonFormatter",
    "KeyValueFormatter",
    "clear_secrets",
    "configure_logging",
    "redact",
    "register_secrets",
]

_PAIR = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s;]+)")
_INT = re.compile(r"-?\d{1,18}")
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


def _timestamp(record: logging.LogRecord) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    """Fields passed with `extra=`: the record's attributes that logging itself does not set."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


def _value(raw: str) -> Any:
    """A lifted `key=value` value as JSON would want it: 5 -> 5, 'a b' -> a b."""
    if _INT.fullmatch(raw):
        return int(raw)
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        try:
            return ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return raw[1:-1]
    return raw


class KeyValueFormatter(logging.Formatter):
    """`ts=... level=... logger=... event=... key=value ...` (console)."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"ts={_timestamp(record)} level={record.levelname} logger={record.name} {record.getMessage()}"
        for key, value in _extras(record).items():
            text = str(value)
            line += f" {key}={text!r}" if not text or any(c.isspace() for c in text) else f" {key}={text}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return redact(line)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, the lifted pairs, `extra=` fields, msg."""

    def format(self, record: logging.LogRecord) -> str:
        message = redact(record.getMessage())
        body: dict[str, Any] = {"ts": _timestamp(record), "level": record.levelname, "logger": record.name}
        for key, raw in _PAIR.findall(message):
            body.setdefault(key, _value(raw))
        for key, value in _extras(record).items():
            body[key] = redact(value) if isinstance(value, str) else value
        body["msg"] = message
        if record.exc_info:
            body["exception"] = redact(self.formatException(record.exc_info))
        return redact(json.dumps(body, ensure_ascii=False, default=str))


def configure_logging(fmt: str = "console", level: str = "INFO", secrets: Iterable[str] = ()) -> None:
    """Root handler on stderr; aiokafka's chatter is kept at WARNING; `secrets`: see `register_secrets`."""
    register_secrets(secrets)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, root.level))
