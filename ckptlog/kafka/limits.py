"""Limits the broker sets on its clients, checked before connecting. Pure: no aiokafka import, so
settings can be validated (`ckptlog fold`) without loading the Kafka client."""

from __future__ import annotations

MIN_SESSION_TIMEOUT_MS, MAX_SESSION_TIMEOUT_MS = 6_000, 1_800_000
"""The broker's default group.min.session.timeout.ms and group.max.session.timeout.ms: a member
asking for a session timeout outside them is refused when it joins the group."""


def session_timeout_problem(ms: int, flag: str = "session_timeout_ms") -> str | None:
    """Why the broker would refuse this session timeout at join (with its default bounds), else None."""
    if MIN_SESSION_TIMEOUT_MS <= ms <= MAX_SESSION_TIMEOUT_MS:
        return None
    return (
        f"{flag}={ms} lies outside {MIN_SESSION_TIMEOUT_MS}..{MAX_SESSION_TIMEOUT_MS} ms, the broker's default "
        "group.min/max.session.timeout.ms: the group would refuse the consumer when it joins; give a value in "
        "that range (10000 by default)"
    )
