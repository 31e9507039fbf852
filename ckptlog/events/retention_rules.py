"""The retention rules beyond Ray (contract §3 "Retention beyond Ray"), one entry per rule.

A rule preserves a checkpoint for good when it is registered: never evicted, not counted against
`num_to_keep`, its VIEW entry labelled with the rule. Each entry holds everything about its rule:

- `fields`: its `checkpoint_config` fields — name, type, bound, the schema's description and the
  CLI flag's help. The first one switches the rule on (the rule is off while it is None).
- `decide`: the preservation decision, a pure function the fold calls for each new checkpoint of
  a run with the rule on (ckptlog/processor/core/retention.py): the run's config, the report's
  metrics, report index and CloudEvents `time`, and the rule's own state (None at first) ->
  `Decision` (preserved?, its new state, a warning code).
- `state`: the name of the rule's state in a run (and in its snapshot), or None for none.
- `label`: the VIEW's `preserved` value; `problems`: its warning codes and messages; `docs`: its
  line in docs/contract.md.

What is spelled per field elsewhere is generated from this table by `python -m
ckptlog.events.rule_codegen` (tests/unit/events/test_retention_rules.py checks the output is
current): the pydantic model (ckptlog/events/models.py), the decoded Struct (decoded.py), the VIEW
model and its `preserved` literal (view.py), the client keyword arguments (`RuleKwargs`,
ckptlog/events/rule_kwargs.py) and the contract's list. The CLI flags are built from `fields` when
the command is declared (ckptlog/cli/options.py `rule_options`). So a new rule is one entry here.

The table comes first in precedence: a checkpoint two rules preserve gets the first one's label.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from ckptlog.events.metrics import MISSING, lookup

Kind = Literal["int", "float", "str"]


@dataclass(frozen=True)
class RuleField:
    """One `checkpoint_config` field: `minimum` is `(">=", 1)` or `(">", 0)` for numbers (a float
    must also be finite); a str is non-empty."""

    name: str
    kind: Kind
    description: str
    flag_help: str
    minimum: tuple[Literal[">=", ">"], int] | None = None


Decision = tuple[bool, Any, str | None]
"""A rule's verdict on one new checkpoint: (preserved?, the rule's new state, a warning code when it
could not decide — the checkpoint is then not preserved by it). A plain tuple: the fold asks each
rule that is on about every checkpoint (a NamedTuple's constructor costs ~0.3 µs a call)."""


Decide = Callable[[Any, dict[str, Any], int, str | None, Any], Decision]


@dataclass(frozen=True)
class RetentionRule:
    label: str
    fields: tuple[RuleField, ...]
    decide: Decide
    docs: str
    state: str | None = None
    problems: Mapping[str, str] | None = None

    def is_on(self, config: Any) -> bool:
        return getattr(config, self.fields[0].name) is not None

    def warning(self, config: Any, run_id: str, path: str, code: str) -> str:
        """The message of warning `code` (one of `problems`) for a checkpoint of `run_id`; the
        template reads `run`, `path` and the rule's fields by name."""
        values = {f.name: getattr(config, f.name) for f in self.fields}
        return (self.problems or {})[code].format(run=run_id, path=path, **values)


def _every_n_steps(config: Any, metrics: dict[str, Any], report_index: int, time: str | None, state: Any) -> Decision:
    attribute = config.step_attribute
    step = report_index + 1 if attribute is None else lookup(metrics, attribute)
    if step is MISSING:
        return False, state, "step_missing"
    if isinstance(step, bool) or not isinstance(step, int | float) or step != step or step % 1:
        return False, state, "step_not_integral"
    return step % config.keep_every_n_steps == 0, state, None


def _time_interval(config: Any, metrics: dict[str, Any], report_index: int, time: str | None, at: Any) -> Decision:
    if time is None:
        return False, at, None
    seconds = epoch(time)
    if at is None or seconds - at >= config.keep_time_interval_s:
        return True, seconds, None
    return False, at, None


def epoch(time: str) -> float:
    """A CloudEvents `time` (RFC 3339) as epoch seconds; a time without offset counts as UTC
    (never the machine's own zone: the fold must not depend on where it runs)."""
    parsed = datetime.fromisoformat(time)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


_NO_STEP = "run {run!r}: checkpoint {path!r} {why} step {step_attribute!r}; keep_every_n_steps preserves nothing here"

RULES: tuple[RetentionRule, ...] = (
    RetentionRule(
        label="steps",
        fields=(
            RuleField(
                "keep_every_n_steps",
                "int",
                "Preserve every checkpoint whose step is a multiple of N (Orbax's keep_period).",
                "Preserve for good every checkpoint whose step is a multiple of N.",
                (">=", 1),
            ),
            RuleField(
                "step_attribute",
                "str",
                "The metric holding the step (flattened with '/'); default: the report's 1-based number.",
                "Metric holding the step (default: the report's 1-based number).",
            ),
        ),
        decide=_every_n_steps,
        problems={
            "step_missing": _NO_STEP.replace("{why}", "has no metric"),
            "step_not_integral": _NO_STEP.replace("{why}", "has a non-integral"),
        },
        docs="`keep_every_n_steps` N, with `step_attribute`: a checkpoint whose step is an integer multiple "
        "of N is preserved (Orbax's `keep_period`). The step is the metric `step_attribute` (flattened "
        "with `/`), or without one the report's 1-based number (`report_index + 1`). A missing or "
        "non-integral step preserves nothing, and a `warning` says so (`step_missing`, `step_not_integral`).",
    ),
    RetentionRule(
        label="time",
        fields=(
            RuleField(
                "keep_time_interval_s",
                "float",
                "Preserve a checkpoint reported (CloudEvents `time`) at least this long after the last one "
                "this rule preserved; the first timed one is (Orbax's keep_time_interval).",
                "Preserve for good one checkpoint per this many seconds of report time.",
                (">", 0),
            ),
        ),
        decide=_time_interval,
        state="preserved_at",
        docs="`keep_time_interval_s` T: a checkpoint whose report carries a CloudEvents `time` at least T "
        "seconds after the last checkpoint this rule preserved is preserved (the first timed one is); "
        "a `time` without an offset counts as UTC. A report without `time` is never preserved by this "
        "rule; it looks at every timed checkpoint, also those an earlier rule preserves.",
    ),
)

RULE_FIELDS: tuple[RuleField, ...] = tuple(f for rule in RULES for f in rule.fields)
LABELS: tuple[str, ...] = tuple(rule.label for rule in RULES)
RULE_STATES: tuple[str, ...] = tuple(rule.state for rule in RULES if rule.state is not None)
"""The names of the rules' state in a run, as its snapshot writes them (`preserved_at`: the time rule's)."""


def active(config: Any) -> tuple[RetentionRule, ...]:
    """The rules a run's config switches on, in precedence order."""
    return tuple(rule for rule in RULES if rule.is_on(config))


def rule_config(rules: Mapping[str, Any]) -> dict[str, Any]:
    """The `checkpoint_config` entries of a client's rule keyword arguments: those given (not
    None), in table order. An unknown name raises TypeError, as a misspelt keyword argument does."""
    unknown = sorted(set(rules) - {f.name for f in RULE_FIELDS})
    if unknown:
        known = ", ".join(f.name for f in RULE_FIELDS)
        raise TypeError(f"unexpected retention keyword argument(s) {', '.join(unknown)}; the rules take: {known}")
    return {f.name: rules[f.name] for f in RULE_FIELDS if rules.get(f.name) is not None}
