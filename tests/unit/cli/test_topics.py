"""`ckptlog topics`: the processor's topics and group, and what --check (the compose health check) refuses."""

from __future__ import annotations

import re

from ckptlog.cli.topics import problems, report
from ckptlog.processor.service.settings import load_settings

SETTINGS = load_settings(None, group_id="g")
ALL = dict.fromkeys(
    (
        "ckptlog.events",
        "ckptlog.checkpoints",
        "ckptlog.validations",
        "ckptlog.watermarks",
        "ckptlog.state",
        "ckptlog.dlq",
    ),
    1,
)


def test_a_second_member_of_a_one_partition_group_is_shown_idle() -> None:
    lines = report(SETTINGS, ALL, ("Stable", 2))
    assert lines[0].split() == ["ckptlog.events", "input", "1", "partition(s)"]
    assert lines[-1] == "group g: Stable, 2 member(s); 1 of them idle (the input topic has 1 partition(s))"
    assert problems(SETTINGS, ALL, ("Stable", 2)) == []


def test_check_refuses_missing_topics_and_an_empty_group() -> None:
    missing = {k: v for k, v in ALL.items() if k != "ckptlog.validations"}
    assert "MISSING" in report(SETTINGS, missing, ("Empty", 0))[2]
    found = problems(SETTINGS, missing, ("Empty", 0))
    assert found[0].startswith("topics missing: ckptlog.validations") and "no processor in group g" in found[1]


def test_long_topic_names_keep_the_columns_aligned() -> None:
    """Issue 38 item 8: a name over 30 characters (a demo's) pushed its row's columns right."""
    prefix = "ckptlog-demo-0123456789abcdef"
    names = {f"{role}_topic": f"{prefix}.{role}" for role in ("checkpoints", "validations", "watermarks", "state")}
    settings = load_settings(None, group_id="g", input_topic=f"{prefix}.events", dlq_topic="dlq", **names)
    counts = dict.fromkeys([f"{prefix}.events", *names.values()], 2)
    lines = report(settings, counts, ("Stable", 1))[:-1]
    columns = {tuple(m.start() for m in re.finditer(r"(?<=  )\S", line)) for line in lines}
    assert len(lines) == 6 and len(columns) == 1 and len(next(iter(columns))) == 2, "\n".join(lines)
