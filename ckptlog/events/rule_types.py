"""Types of the retention rules beyond Ray: the VIEW's `preserved` labels, the client keywords.

Generated from ckptlog/events/retention_rules.py by `python -m ckptlog.events.rule_codegen`; do not edit.
"""

from __future__ import annotations

from typing import Literal, TypedDict

Preserved = Literal["steps", "time"]
"""The `preserved` label of a checkpoint a rule keeps for good (contract §3)."""


class RuleKwargs(TypedDict, total=False):
    """The rules' `checkpoint_config` fields as keyword arguments of `run_started` (None: not set)."""

    keep_every_n_steps: int | None
    step_attribute: str | None
    keep_time_interval_s: float | None
