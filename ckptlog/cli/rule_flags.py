"""The CLI flags of the retention rules beyond Ray: field name -> (type, help).

Generated from ckptlog/events/retention_rules.py by `python -m ckptlog.events.rule_codegen`; do not edit.
A copy, so `start-run --help` need not import the wire contract (ckptlog/cli/options.py `rule_options`).
"""

from __future__ import annotations

# fmt: off
RULE_FLAGS: dict[str, tuple[str, str]] = {
    'keep_every_n_steps': ('int', "Preserve for good every checkpoint whose step is a multiple of N."),
    'step_attribute': ('str', "Metric holding the step (default: the report's 1-based number)."),
    'keep_time_interval_s': ('float', "Preserve for good one checkpoint per this many seconds of report time."),
}
