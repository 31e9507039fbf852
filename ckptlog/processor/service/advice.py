"""Warnings for set-ups that work but surprise: where the processor would otherwise stay silent.

- no `--snapshots`: snapshots go to this host's disk, so a processor started elsewhere (another
  host, a container without that directory) finds none and folds the whole input log again;
- an instance the group gave no partition: it idles as a standby (one input partition is folded
  by one instance at a time) — visible in the log instead of looking like a hang.
"""

from __future__ import annotations

from ckptlog.processor.service.settings import ServiceSettings


def start_advice(settings: ServiceSettings) -> list[str]:
    """Warnings to log once at start-up (each a `key=value` log line)."""
    advice = []
    if "snapshots" not in settings.model_fields_set:
        advice.append(
            f"event=default_snapshots url={settings.snapshots}: no --snapshots given, so snapshots go to this "
            "host's disk; a processor started anywhere else (another host, a container without that directory) "
            "finds none and folds the whole input log again at every start. Give --snapshots (any fsspec URL, "
            "e.g. s3://bucket/ckptlog-snapshots) shared by every instance"
        )
    return advice


def idle_message(settings: ServiceSettings) -> str:
    """For an instance whose assignment is empty."""
    return (
        f"event=idle group={settings.group_id} topic={settings.input_topic}: this instance holds no partition of "
        f"{settings.input_topic}; the group's other members hold them all (each input partition is folded by one "
        "instance at a time), so it waits as a standby until one leaves. The input topic's partition count bounds "
        "how many instances work; it is set when the topic is created (--topic-partitions): adding partitions "
        "later would move runs to other partitions"
    )
