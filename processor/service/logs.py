"""Structured logs: `key=value` text lines or one JSON object per line (`--log-format json`).

Log calls in ckptlog write `event=name key=value ...` messages; the JSON formatter lifts
those pairs into fields so log pipelines can filter on `event`, `partition`, `run`, ...
(the whole line stays in `msg`).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time

_PAIR = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s;]+)")


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        line = f"ts={stamp} level={record.levelname} logger={record.name} {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        body: dict[str, object] = {"ts": record.created, "level": record.levelname, "logger": record.name}
        for key, value in _PAIR.findall(message):
            body.setdefault(key, value.strip("'\""))
        body["msg"] = message
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return json.dumps(body, ensure_ascii=False, default=str)


def configure_logging(fmt: str = "text", level: str = "INFO") -> None:
    """Root handler on stderr; aiokafka's chatter is kept at WARNING."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, root.level))
