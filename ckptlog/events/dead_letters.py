"""The dead-letter record's headers (contract §8): Kafka Connect's names, so Connect-aware tools
show ckptlog's errors too, plus ckptlog's reason code and processor version.

The processor writes them (ckptlog/processor/service/records.py); `ckptlog rejections` and the clients
read them back (ckptlog/client/dead_letters.py).
"""

from __future__ import annotations

DLQ_PREFIX = "__connect.errors."
H_TOPIC = DLQ_PREFIX + "topic"
H_PARTITION = DLQ_PREFIX + "partition"
H_OFFSET = DLQ_PREFIX + "offset"
H_STAGE = DLQ_PREFIX + "stage"
H_CLASS = DLQ_PREFIX + "exception.class.name"
H_MESSAGE = DLQ_PREFIX + "exception.message"
H_REASON = "__ckptlog.errors.reason"
H_VERSION = "__ckptlog.errors.processor.version"
